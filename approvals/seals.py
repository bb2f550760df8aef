"""Seals: the activity chain's head (row id and hash) copied outside the database, so a rewrite of history
with every hash recomputed is still caught.

The hash chain (approvals.activity) finds any edit made around the triggers, unless whoever made it also
recomputed every later hash and the head: only the schema owner or a superuser can, and `activity verify`
then says "chain intact". A seal posted to Slack is out of their reach: `verify_anchor` checks that the row
the seal names still has the seal's hash and that the chain still runs from it to the head. A rewrite of
any row up to the sealed one changes that row's hash (each hash covers every row before it).

A seal is written `ROW:HASH` (64 lowercase hex); an empty log's is `0:` and the chain's genesis hash.
Posting is the caller's (the bot or the CLI, in Slack); this module reads the head, decides when a seal is
due, and records each posted seal as an `activity.sealed` row.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from approvals import activity
from approvals.activity import GENESIS, ChainReport
from engine import locks
from engine import schema as t

SEALED = "activity.sealed"
ENTITY = "activity_log"

# Why a seal was posted, as its activity row says.
DAILY = "daily"
POLICY_CHANGE = "policy change"
BY_HAND = "by hand"

# Rows that change (or propose to change) the rules: a seal follows each. `db.policy` is the database's
# own account (migration 0012), so a change made in psql is sealed too.
POLICY_ACTIONS = ("db.policy", "policy.changed", "policy.proposed", "policy.rejected", "policy.superseded")

_SEAL_TEXT = re.compile(r"(\d{1,19}):([0-9a-fA-F]{64})")


class SealError(ValueError):
    """A seal that cannot be read; the message is one line naming the problem."""


@dataclass(frozen=True)
class Seal:
    row: int  # the last row's id when the seal was taken (0: the log was empty)
    hash: str  # that row's hash (GENESIS for an empty log)

    def line(self) -> str:
        return f"{self.row}:{self.hash}"


def parse_seal(raw: str) -> Seal:
    """`ROW:HASH` as `activity seal` prints it."""
    found = _SEAL_TEXT.fullmatch(raw.strip())
    if found is None:
        raise SealError(f"a seal is ROW:HASH (a row id, a colon, 64 hex digits), got {raw.strip()!r}")
    return Seal(int(found.group(1)), found.group(2).lower())


_HEAD = select(t.activity_log_head.c.last_id, t.activity_log_head.c.last_hash)


async def seal_in(conn: AsyncConnection) -> Seal:
    """The chain's head as the caller's transaction sees it."""
    head = (await conn.execute(_HEAD)).first()
    if head is None:
        raise SealError("the chain head row (activity_log_head) is missing: there is no head to seal")
    return Seal(head.last_id or 0, head.last_hash)


async def current_seal(engine: AsyncEngine) -> Seal:
    async with engine.connect() as conn:
        return await seal_in(conn)


# ---- checking a seal ----


@dataclass(frozen=True)
class AnchorReport:
    """What `activity verify --anchor` found: the chain as plain verify sees it, and the sealed row's hash
    now (None: no such row)."""

    chain: ChainReport
    seal: Seal
    found: str | None

    @property
    def anchored(self) -> bool:
        return self.found == self.seal.hash

    @property
    def intact(self) -> bool:
        return self.chain.intact and self.anchored

    def line(self) -> str:
        if self.intact:
            return f"{self.chain.rows} rows, chain intact through the seal at row {self.seal.row}"
        problems = [] if self.chain.intact else [self.chain.line()]
        if not self.anchored:
            problems.append(self._anchor_problem())
        return "; ".join(problems)

    def _anchor_problem(self) -> str:
        row = self.seal.row
        if self.found is None:
            return (
                f"{self.chain.rows} rows, but row {row}, which the seal names, is not in the log "
                "(rows were removed)"
            )
        return (
            f"{self.chain.rows} rows, but row {row}'s hash is {self.found}, the seal says {self.seal.hash}: "
            f"the history up to row {row} was rewritten after the seal was taken"
        )


_HASH_AT = select(t.activity_log.c.hash).where(t.activity_log.c.id == bindparam("row"))


async def verify_anchor(engine: AsyncEngine, seal: Seal) -> AnchorReport:
    """The whole chain checked as `verify_chain` does, and the sealed row's hash, in one snapshot."""
    async with engine.connect() as conn:
        conn = await conn.execution_options(isolation_level="REPEATABLE READ")
        async with conn.begin():
            chain = await activity.verify_in(conn)
            if seal.row == 0:  # taken on an empty log: the chain starts from genesis whatever follows
                return AnchorReport(chain, seal, GENESIS)
            found = (await conn.execute(_HASH_AT, {"row": seal.row})).scalar_one_or_none()
    return AnchorReport(chain, seal, found)


# ---- posting seals ----

PostSeal = Callable[[Seal], Awaitable[Sequence[str]]]  # posts the seal; returns where it went


async def post_seal(engine: AsyncEngine, post: PostSeal, *, why: str, actor_type: str, actor_id: str) -> Seal:
    """Take the head, have `post` put it outside the database, and record where it went (an
    `activity.sealed` row, appended after the head it seals). Nothing is recorded when `post` raises or
    posted nowhere. The head lock is not held while posting: appends go on meanwhile."""
    async with engine.begin() as conn:
        await locks.xact_lock(conn, locks.SEAL)
        seal = await seal_in(conn)
        posted_to = list(await post(seal))
        if posted_to:
            details = {"row": seal.row, "hash": seal.hash, "why": why, "posted_to": posted_to}
            await activity.record(conn, actor_type, actor_id, SEALED, ENTITY, str(seal.row), details)
    return seal


_LAST_SEAL = (
    select(t.activity_log.c.id, t.activity_log.c.at)
    .where(t.activity_log.c.action == SEALED)
    .order_by(t.activity_log.c.at.desc(), t.activity_log.c.id.desc())
    .limit(1)
)
_POLICY_SINCE = select(
    select(t.activity_log.c.id)
    .where(
        t.activity_log.c.action.in_(POLICY_ACTIONS),
        t.activity_log.c.id > bindparam("since"),
    )
    .exists()
)
_LAST_ID = select(func.max(t.activity_log.c.id))


async def seal_due(conn: AsyncConnection, day_start: datetime) -> str | None:
    """Why a seal is due now (POLICY_CHANGE, DAILY), or None: a policy row since the last seal, or no seal
    since `day_start` while something was appended after the last one (a quiet log needs no new seal)."""
    last = (await conn.execute(_LAST_SEAL)).first()
    since = last.id if last is not None else 0
    if (await conn.execute(_POLICY_SINCE, {"since": since})).scalar_one():
        return POLICY_CHANGE
    if last is not None and last.at >= day_start:
        return None
    last_id = (await conn.execute(_LAST_ID)).scalar_one()
    return DAILY if last_id is not None and last_id > since else None
