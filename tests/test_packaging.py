"""The built wheel works on its own: installed into a scratch venv, `billsleuth` runs from a directory
that is not the checkout — migrations and default scenarios come from the installed package.

The scratch venv borrows this venv's dependencies through a .pth line (a plain path entry: this venv's
own .pth files, the editable install's among them, are not run), so installing needs no network."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from engine import migrate
from scenarios.extra_kinds import SCENARIOS_PER_SEED

REPO = Path(__file__).resolve().parent.parent
# What the wheel is built from; copied so stale build/ output in the checkout cannot leak into it.
SOURCES = (
    "pyproject.toml",
    "setup.py",
    "README.md",
    "engine",
    "scenarios",
    "agent",
    "approvals",
    "bot",
    "migrations",
)


def build_wheel(into: Path) -> Path:
    source = into / "source"
    source.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(REPO / name, source / name)
    pip(["wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", str(into), str(source)])
    (wheel,) = into.glob("billsleuth-*.whl")
    return wheel


def pip(args: list[str]) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--quiet", *args], check=True, timeout=120)


def scratch_venv(where: Path, wheel: Path) -> Path:
    """A venv holding only the wheel; its dependencies are this venv's. Returns its bin directory."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=60)
    python = where / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "billsleuth-deps.pth").write_text(sysconfig.get_path("purelib") + "\n", encoding="utf-8")
    pip(["--python", str(python), "install", "--no-deps", "--no-index", str(wheel)])
    return where / "bin"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("packaging")
    return scratch_venv(root / "venv", build_wheel(root))


def test_the_wheel_runs_from_any_directory(installed: Path, empty_db_url: str, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BILLSLEUTH_"))}
    env |= {"DATABASE_URL": empty_db_url, "BILLSLEUTH_HOME": str(tmp_path / "home")}

    def billsleuth(*args: str) -> str:
        done = subprocess.run(
            [str(installed / "billsleuth"), *args],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,  # a guard against a hang, not a speed check: the eval below took 120 s under load
            check=False,
        )
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    where = subprocess.run(
        [str(installed / "python"), "-c", "import bot, migrations; print(bot.__file__, migrations.__file__)"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(REPO) not in where and str(installed.parent) in where  # the wheel's copy, not the checkout

    assert "COMMAND" in billsleuth("--help")
    assert billsleuth("db", "upgrade") == f"schema at {migrate.head_revision()} (was empty)\n"
    assert f"{SCENARIOS_PER_SEED} customers" in billsleuth("seed")
    report = json.loads(billsleuth("eval", "--json"))
    assert report["n"] == SCENARIOS_PER_SEED
    assert report["metrics"]["root_cause"]["rate"] == 1.0
    assert report["metrics"]["overcharge"]["rate"] == 1.0

    # The reply catalogs are compiled into the wheel (it ships no .po to fall back on): a Spanish complaint
    # is answered in Spanish, its amounts written the Spanish way.
    words = "Hola, en julio nos cobraron 1.650,06 dólares y no entendemos por qué. ¿Pueden revisarlo?"
    case = json.loads(billsleuth("case", "open", "C-0002", words, "--as", "U0SUPPORT1", "--json"))
    assert case["reply"]["customer_message"].startswith("Hola, hemos revisado la factura INV-0002-03.")
    assert "321,36\xa0US$" in case["reply"]["customer_message"]
