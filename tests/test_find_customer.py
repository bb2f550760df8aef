"""Finding the customer from a complaint's words: an id, an email address on file, the name as written
(exactly, case, accents and punctuation aside), a name close to it, several candidates, or nobody."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections import Counter

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.cases.customers import Candidate, FoundBy, by_name, find_customer, normalized
from engine import schema
from engine.db import create_engine
from tests.test_cases import BILLSLEUTH

PEOPLE = [
    Candidate("C-0001", "Helio Freight-004", "US"),
    Candidate("C-0002", "Helio Freight-017", "DE"),
    Candidate("C-0003", "Bluefin Labs-001", "GB"),
    Candidate("C-0004", "蓝鲸数据-007", "CN"),
    Candidate("C-0005", "Café Núñez-009", "ES"),
]


def ids(text: str) -> tuple[FoundBy | None, list[str]]:
    match = by_name(PEOPLE, text)
    return match.found_by, [c.id for c in match.candidates]


def test_names_compare_without_case_accents_or_punctuation() -> None:
    assert normalized("  Café  NÚÑEZ-009!") == "cafe nunez 009"
    assert ids("cafe nunez 009 wrote in") == (FoundBy.NAME, ["C-0005"])
    assert ids("we are HELIO FREIGHT 004, why were we charged 1,650.06?") == (FoundBy.NAME, ["C-0001"])
    assert ids("我们是蓝鲸数据-007,为什么扣款") == (FoundBy.NAME, ["C-0004"])  # no spaces between words


def test_a_name_close_enough_is_found_and_said_to_be_fuzzy() -> None:
    assert ids("Helio Frieght-004 here") == (FoundBy.FUZZY_NAME, ["C-0001"])
    assert ids("this is bluefin labs") == (FoundBy.FUZZY_NAME, ["C-0003"])


def test_an_amount_or_a_date_in_the_message_does_not_pick_among_numbered_names() -> None:
    """The digits of "$117.64" or "2026-10-15" share trigrams with a name's number ("…-017", "…-102"):
    they must not tip a fuzzy match towards one of several customers the words fit equally."""
    kestrels = [Candidate("C-0102", "Kestrel Analytics-102", "US"), *PEOPLE[:1]]
    kestrels.append(Candidate("C-0033", "Kestrel Analytics-033", "US"))
    for text in (
        "thanks, Kestrel Analytic accounts team — we paid $185.64",
        "Kestrel Analytic here: the invoice of 2026-10-15 is wrong",
    ):
        match = by_name(kestrels, text)
        assert (match.found_by, [c.id for c in match.candidates]) == (
            FoundBy.FUZZY_NAME,
            ["C-0033", "C-0102"],
        )
    assert ids("Helio Freight here, we paid 117.64 twice") == (FoundBy.FUZZY_NAME, ["C-0001", "C-0002"])


def test_a_name_that_fits_several_gives_the_candidates_and_none_gives_nothing() -> None:
    assert ids("Hi, this is Helio Freight — why were we charged 1,650.06 in July?") == (
        FoundBy.FUZZY_NAME,
        ["C-0001", "C-0002"],
    )
    assert by_name(PEOPLE, "Hi, this is Helio Freight").customer is None
    assert ids("why did you charge me 89.00 in May?") == (None, [])


@pytest.fixture
def engine(seeded_db_url: str) -> AsyncEngine:
    return create_engine(seeded_db_url)


async def customers(engine: AsyncEngine) -> list[tuple[str, str, str]]:
    c = schema.customers.c
    async with engine.connect() as conn:
        return [tuple(r) for r in await conn.execute(select(c.id, c.name, c.contact_email).order_by(c.id))]


async def test_each_way_of_naming_a_customer_in_the_seeded_ledger(engine: AsyncEngine) -> None:
    everyone = await customers(engine)
    customer_id, name, email = next(row for row in everyone if row[1].isascii())
    assert email and email.endswith(".example.com")  # the demo ledger fills contact_email

    by_id = await find_customer(engine, f"customer {customer_id.lower()} says hi")
    assert (by_id.found_by, by_id.customer and by_id.customer.id) == (FoundBy.ID, customer_id)
    by_email = await find_customer(engine, f"From: {email.upper()} — why twice?")
    assert (by_email.found_by, by_email.customer and by_email.customer.id) == (FoundBy.EMAIL, customer_id)
    exact = await find_customer(engine, f"Hello, {name.lower()} here. Why this charge?")
    assert (exact.found_by, exact.customer and exact.customer.id) == (FoundBy.NAME, customer_id)

    base = Counter(n.rsplit("-", 1)[0] for _, n, _ in everyone if n.isascii())
    shared = next(b for b, count in base.most_common() if count >= 2)
    several = await find_customer(engine, f"This is {shared}: why were we charged twice?")
    assert several.customer is None and 2 <= len(several.candidates) <= 5
    assert all(c.name.startswith(shared) for c in several.candidates)
    assert (await find_customer(engine, "why did you charge me 89.00 in May?")).candidates == ()
    await engine.dispose()


async def test_the_cli_finds_the_customer_or_lists_the_candidates(
    seeded_db_url: str, engine: AsyncEngine
) -> None:
    everyone = await customers(engine)
    await engine.dispose()
    customer_id, _, email = next(row for row in everyone if row[1].isascii())
    base = Counter(n.rsplit("-", 1)[0] for _, n, _ in everyone if n.isascii())
    shared = next(b for b, count in base.most_common() if count >= 2)
    env = {"DATABASE_URL": seeded_db_url, "BILLSLEUTH_INVESTIGATOR": "offline", "PATH": "/usr/bin:/bin"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(BILLSLEUTH), *args], capture_output=True, text=True, env=env, timeout=120)

    several, found = await asyncio.gather(
        asyncio.to_thread(run, "case", "open", "", f"{shared} here: why twice?", "--as", "U0SUPPORT1"),
        asyncio.to_thread(
            run, "case", "open", "", f"{email} asks why she was charged twice", "--as", "U0SUPPORT1", "--json"
        ),
    )
    assert several.returncode == 2 and "several customers" in several.stderr and shared in several.stderr
    assert len(several.stderr.strip().splitlines()) == 1
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["customer_id"] == customer_id
