"""A reply's words, money, months and numbers as its reader writes them.

The sentences live in gettext catalogs, one per language (agent/locale/<locale>/LC_MESSAGES/billsleuth.po,
compiled to .mo by the build: see setup.py). Money, months and number parsing come from Babel's CLDR data:
`174,90 US$`, `1.650,06 €`, `septiembre de 2025`. English and Chinese keep the forms their replies have
always had (`174.90`, `174.90 美元`, `2025 年 9 月`). The internal note and Slack never go through here.
"""

from __future__ import annotations

import functools
import gettext
import io
import re
from datetime import date
from decimal import Decimal
from pathlib import Path

from agent.language import Language
from engine.money import fmt_amount

DOMAIN = "billsleuth"
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
# Babel's (and the catalogs') locale for each reply language.
LOCALES: dict[Language, str] = {
    "en": "en",
    "zh": "zh_Hans",
    "es": "es",
    "fr": "fr",
    "de": "de",
    "pt": "pt_BR",
    "ja": "ja",
    "ko": "ko",
    "it": "it",
    "nl": "nl",
}


@functools.cache
def translations(language: Language) -> gettext.NullTranslations:
    """The language's compiled catalog. A checkout where the .po is newer than its .mo (edited since the
    last build) compiles the .po in memory, so a source tree never answers with stale words."""
    messages = LOCALE_DIR / LOCALES[language] / "LC_MESSAGES"
    compiled, source = messages / f"{DOMAIN}.mo", messages / f"{DOMAIN}.po"
    if compiled.exists() and (not source.exists() or compiled.stat().st_mtime >= source.stat().st_mtime):
        with compiled.open("rb") as fp:
            return gettext.GNUTranslations(fp)
    if not source.exists():
        raise FileNotFoundError(f"no message catalog for {language} under {messages}")
    return gettext.GNUTranslations(io.BytesIO(compile_po(source)))


def compile_po(source: Path) -> bytes:
    """A .po file as .mo bytes, by Babel's own compiler (no GNU gettext tools needed)."""
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    with source.open("rb") as fp:
        catalog = read_po(fp)
    out = io.BytesIO()
    write_mo(out, catalog)
    return out.getvalue()


def msg(message: str) -> str:
    """Marks a catalog message where it is written down (a table of them); `text` translates it later."""
    return message


def text(language: Language, message: str, **values: str) -> str:
    """A catalog sentence in `language`, its `{placeholders}` filled."""
    return translations(language).gettext(message).format(**values)


def in_context(language: Language, context: str, message: str) -> str:
    return translations(language).pgettext(context, message)


def money(language: Language, amount: str, currency: str) -> str:
    """An amount from the evidence ("1650.06") as the reader writes it. English keeps the bare number its
    replies have always had; Chinese the number and the currency's name; the rest Babel's currency format."""
    if language == "en":
        return amount
    value = Decimal(amount)
    if language == "zh":
        from babel.numbers import get_currency_name

        number = fmt_amount(value, currency).removesuffix(f" {currency}")
        return f"{number} {get_currency_name(currency, locale=LOCALES['zh'])}"
    from babel.numbers import format_currency

    return format_currency(value, currency, locale=LOCALES[language])


def amount_with_currency(language: Language, amount: Decimal, currency: str) -> str:
    """A credit note's amount: in English `123.60 USD` (the currency's own decimals), else as `money`."""
    if language == "en":
        return fmt_amount(amount, currency)
    return money(language, f"{amount}", currency)


ENGLISH_MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip


def month(language: Language, day: str) -> str:
    """The month of an ISO date as a reply names it: "June 2025", "2025 年 6 月", "junio de 2025" (the
    numbers are the date's own parts, so they stay grounded)."""
    year, number = int(day[:4]), int(day[5:7])
    if language == "en":
        return f"{ENGLISH_MONTHS[number - 1]} {year}"
    if language == "zh":
        return f"{year} 年 {number} 月"
    from babel.dates import format_skeleton

    return format_skeleton("yMMMM", date(year, number, 1), locale=LOCALES[language])


# How each locale writes a number: its decimal mark, and the marks that may group its thousands (a French
# reader's narrow no-break space, and the plain space people type instead).
DOT_DECIMAL = (".", ",")
SEPARATORS: dict[Language, tuple[str, str]] = {
    "en": DOT_DECIMAL,
    "zh": DOT_DECIMAL,
    "ja": DOT_DECIMAL,
    "ko": DOT_DECIMAL,
    "es": (",", "."),
    "de": (",", "."),
    "pt": (",", "."),
    "it": (",", "."),
    "nl": (",", "."),
    "fr": (",", "\u202f\u00a0 "),
}


@functools.cache
def number_pattern(language: Language) -> re.Pattern[str]:
    """A number as `language` writes it — "1,650.06", "1.650,06", "1 650,06" — wherever it stands
    ("174,90US$", "US$174.90"), never part of a longer number."""
    decimal, group = SEPARATORS[language]
    d, g = re.escape(decimal), "[" + re.escape(group) + "]"
    return re.compile(rf"(?<![\d{d}])-?\d+(?:{g}\d{{3}})*(?:{d}\d+)?(?!\d)(?!{d}\d)")


def parse_number(token: str, language: Language) -> Decimal:
    """A token `number_pattern(language)` found, as a Decimal ("1.650,06" in German is 1650.06)."""
    decimal, group = SEPARATORS[language]
    plain = "".join(ch for ch in token if ch not in group)
    return Decimal(plain.replace(decimal, "."))
