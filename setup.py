"""The build as pyproject.toml describes it, plus one step: the reply catalogs are compiled.

Each agent/locale/<locale>/LC_MESSAGES/billsleuth.po becomes a .mo by Babel's own compiler (no GNU gettext
on the machine needed): into the wheel's build tree for a wheel, beside the .po for the editable install
`make` does (that one serves the checkout's files as they are). Babel is a locked build requirement.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

CATALOGS = "agent/locale/*/LC_MESSAGES/*.po"


class BuildWithCatalogs(build_py):
    def run(self) -> None:
        super().run()
        for source in sorted(Path(__file__).resolve().parent.glob(CATALOGS)):
            relative = source.relative_to(Path(__file__).resolve().parent).with_suffix(".mo")
            target = source.with_suffix(".mo") if self.editable_mode else Path(self.build_lib) / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(_compiled(source))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        root = Path(__file__).resolve().parent
        mo = [str(Path(self.build_lib) / p.relative_to(root).with_suffix(".mo")) for p in root.glob(CATALOGS)]
        return [*super().get_outputs(include_bytecode), *mo]


def _compiled(source: Path) -> bytes:
    import io

    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    with source.open("rb") as fp:
        catalog = read_po(fp)
    out = io.BytesIO()
    write_mo(out, catalog)
    return out.getvalue()


setup(cmdclass={"build_py": BuildWithCatalogs})
