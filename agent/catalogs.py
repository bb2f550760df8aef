"""The reply catalogs' messages, read from the code: `python -m agent.catalogs` rewrites billsleuth.pot
(the template a translator starts from) and says which catalog lacks which message.

A tool for whoever edits the sentences, never imported at run time; the build compiles the .po files
(setup.py) and agent.i18n reads them.
"""

from __future__ import annotations

import sys
from pathlib import Path

from agent.i18n import DOMAIN, LOCALE_DIR, LOCALES

SOURCES = (Path(__file__).resolve().parent / "graph" / "prompts.py",)
# `text(language, message, …)`, `in_context(language, context, message)` and `msg(message)` (agent.i18n)
# mark the messages.
KEYWORDS = {"text": (2,), "in_context": ((2, "c"), 3), "msg": (1,)}


def template() -> object:
    """Every message the code asks the catalogs for, as a Babel catalog."""
    from babel.messages.catalog import Catalog
    from babel.messages.extract import extract_from_file

    catalog = Catalog(project="billsleuth", domain=DOMAIN)
    for source in SOURCES:
        for line, message, _comments, context in extract_from_file("python", source, keywords=KEYWORDS):
            catalog.add(message, locations=[(source.name, line)], context=context)
    return catalog


def missing() -> dict[str, list[str]]:
    """Per catalog, the messages it has no words for (English needs none: its msgids are its words)."""
    from babel.messages.pofile import read_po

    wanted = template()
    gaps: dict[str, list[str]] = {}
    for language, locale in LOCALES.items():
        with (LOCALE_DIR / locale / "LC_MESSAGES" / f"{DOMAIN}.po").open("rb") as fp:
            catalog = read_po(fp)
        for message in wanted:  # type: ignore[attr-defined]
            if not message.id:
                continue
            found = catalog.get(message.id, context=message.context)
            if found is None or (language != "en" and not found.string):
                gaps.setdefault(locale, []).append(message.id)
    return gaps


def main() -> int:
    from babel.messages.pofile import write_po

    with (LOCALE_DIR / f"{DOMAIN}.pot").open("wb") as fp:
        write_po(fp, template(), width=0, no_location=True)
    gaps = missing()
    for locale, messages in gaps.items():
        print(f"{locale}: {len(messages)} message(s) without words: {messages[0]!r}…", file=sys.stderr)
    return 1 if gaps else 0


if __name__ == "__main__":
    raise SystemExit(main())
