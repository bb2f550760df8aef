"""The findings sweep: the auditor over every customer (agent.auditor.run), each finding recorded the first
time it is seen, and the database side of the digest that posts the new ones to Slack.

Not to be confused with the periodic expiry chore (`CaseService.sweep`, bot.flows.chores.sweep), which
expires overdue notes: this one finds overcharges before customers do.

A finding is keyed by (invoice, overcharge) in `sweep_findings`: the same overcharge found again keeps its
`first_seen`; a partial credit makes a smaller overcharge, which is a new finding. What is listed is what
the audit finds now (issued credits already subtracted), less invoices with an open note (draft or
approved): someone is already settling those. A finding a digest listed (`posted_at`) is never listed in
a digest again.

The bot's daily run is sharded so that several bot processes on one database share it with no coordinator
but Postgres: the first process to start the day's run splits the customers into SHARDS id ranges of
equal size (`sweep.shard_plan`, one per day: every process audits the same ranges); each process audits
the shards whose advisory lock it gets and that no one has done today, and records a shard's findings and
its `sweep.shard_done` row in the transaction that holds its lock. A shard is therefore audited once a day;
a process that dies mid-shard drops its lock with its connection and another process takes the shard on
its next look. The digest goes out once every shard is done (day_result).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from datetime import date
from decimal import Decimal
from typing import Any

from sqlalchemy import and_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from agent.auditor.run import AuditReport, Progress, audit_all, latest_issue_date
from agent.auditor.sweep_record import (
    COLUMNS,
    Key,
    SweepFinding,
    SweepResult,
    current_findings,
    key_of,
    mark_listed,
    record_findings,
    record_sweep,
)
from approvals import activity
from engine import locks
from engine import schema as t
from engine.db import create_engine, driver_connection
from engine.money import fmt, money

__all__ = ["Key", "SweepFinding", "SweepResult", "key_of", "record_sweep"]

POSTED = "sweep.posted"  # activity_log: a digest listed these findings
DAILY_RUN = "sweep.daily_run"  # activity_log: the bot's daily findings sweep ran for this UTC day
SHARD_PLAN = "sweep.shard_plan"  # activity_log: the id ranges a day's sweep is split into
SHARD_DONE = "sweep.shard_done"  # activity_log: one shard of a day's sweep was audited and recorded
SHARDS = 8  # the daily sweep's customers split this many ways across bot processes


async def run_findings_sweep(
    url: str, as_of: date | None = None, *, workers: int = 1, progress: Progress | None = None
) -> SweepResult:
    """Audit every customer (the same streamed, two-pass run as `audit --all`), record what is new, and
    return the current findings that nobody is crediting yet. `progress` as audit_all's."""
    return await record_sweep(url, await audit_all(url, as_of, workers=workers, progress=progress))


def _findings_select() -> Any:
    """The finding columns in SweepFinding's order (findings_record.COLUMNS): a row is SweepFinding(*row)."""
    return select(*(t.sweep_findings.c[name] for name in COLUMNS))


async def claim_unposted(conn: AsyncConnection, keys: Sequence[Key]) -> list[SweepFinding]:
    """The current findings no digest listed yet, locked for the caller's transaction, which posts the
    digest and then marks them (mark_posted) before it commits. Claims are taken one digest at a time
    (an advisory lock), so a concurrent digest waits and then finds them posted; if posting fails the
    transaction rolls back and nothing is marked."""
    await locks.xact_lock(conn, locks.FINDINGS_DIGEST)
    return await current_findings(await driver_connection(conn), keys, unposted=True)


async def mark_posted(
    conn: AsyncConnection,
    findings: Sequence[SweepFinding],
    channel: str,
    ts: str,
    *,
    actor_type: str,
    actor_id: str,
    as_of: date,
) -> None:
    """The digest at (channel, ts) listed these findings: never listed again; on record."""
    if not findings:
        return
    await mark_listed(await driver_connection(conn), [f.key for f in findings], channel, ts)
    await activity.record(
        conn,
        actor_type,
        actor_id,
        POSTED,
        "sweep_digest",
        f"{channel}:{ts}",
        {
            "as_of": as_of,
            "count": len(findings),
            "findings": [{"invoice_id": f.invoice_id, "overcharge": fmt(f.overcharge)} for f in findings],
        },
    )


async def finding_for_case(
    conn: AsyncConnection, invoice_id: str, overcharge: Decimal
) -> SweepFinding | None:
    """The finding, locked until the caller's transaction ends, so two clicks on `Open case` link one
    case; None when there is no such finding."""
    sf = t.sweep_findings.c
    row = (
        await conn.execute(
            _findings_select()
            .where(sf.invoice_id == invoice_id, sf.overcharge == money(overcharge))
            .with_for_update()
        )
    ).first()
    return SweepFinding(*row) if row is not None else None


async def link_case(conn: AsyncConnection, finding: SweepFinding, case_id: str) -> None:
    sf = t.sweep_findings.c
    await conn.execute(
        update(t.sweep_findings)
        .where(and_(sf.invoice_id == finding.invoice_id, sf.overcharge == finding.overcharge))
        .values(case_id=case_id)
    )


async def posted_in(conn: AsyncConnection, channel: str, ts: str) -> list[SweepFinding]:
    """The findings the digest at (channel, ts) listed."""
    sf = t.sweep_findings.c
    rows = await conn.execute(
        _findings_select().where(sf.channel == channel, sf.ts == ts).order_by(sf.invoice_id)
    )
    return [SweepFinding(*r) for r in rows]


async def ran_today(conn: AsyncConnection, day: date) -> bool:
    """Whether the bot's daily findings sweep has run for this UTC day (any process, before a restart)."""
    log = t.activity_log.c
    found = await conn.execute(
        select(log.id).where(log.action == DAILY_RUN, log.entity_id == day.isoformat()).limit(1)
    )
    return found.first() is not None


async def record_daily_run(conn: AsyncConnection, day: date, posted: int) -> None:
    await activity.record(
        conn, activity.SYSTEM, "bot", DAILY_RUN, "sweep_day", day.isoformat(), {"posted": posted}
    )


# ---- the bot's daily run, sharded across processes ---------------------------------------------------------

Shard = tuple[str | None, str | None]  # [lo, hi] customer ids, None: unbounded


def _shard_entity(day: date, shard: int) -> str:
    return f"{day.isoformat()}:{shard}"


def this_process() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def split(ids: Sequence[str], shards: int) -> list[Shard]:
    """`shards` id ranges of about equal size, covering every id (the first and last unbounded, so a
    customer added later falls in one too; one added inside a range already audited waits a day)."""
    size = max(1, -(-len(ids) // shards))
    starts = [0, *range(size, len(ids), size)][:shards]  # where each range begins, as an index
    ranges: list[Shard] = []
    for n, start in enumerate(starts):
        last = n == len(starts) - 1
        ranges.append((None if n == 0 else ids[start], None if last else ids[starts[n + 1] - 1]))
    return ranges


async def shard_plan(conn: AsyncConnection, day: date, shards: int = SHARDS) -> list[Shard]:
    """The day's ranges: made by the first process to ask (under a lock), read by every other."""
    await locks.xact_lock(conn, locks.sweep_plan(day))
    log = t.activity_log.c
    found = await conn.execute(
        select(log.details).where(log.action == SHARD_PLAN, log.entity_id == day.isoformat()).limit(1)
    )
    plan = found.scalar()
    if plan is None:
        ids = list((await conn.execute(select(t.customers.c.id).order_by(t.customers.c.id))).scalars())
        plan = {"ranges": [list(r) for r in split(ids, shards)]}
        await activity.record(conn, activity.SYSTEM, "bot", SHARD_PLAN, "sweep_day", day.isoformat(), plan)
    return [(lo, hi) for lo, hi in plan["ranges"]]


async def audit_free_shards(url: str, day: date, *, by: str = "") -> list[int]:
    """Audit each shard of `day`'s run that no process has done and none is doing (its lock is free);
    return the shards this call audited. A locked shard is skipped, not waited for: if its holder dies,
    the lock goes with its connection and a later call takes the shard."""
    engine = create_engine(url)
    audited: list[int] = []
    try:
        async with engine.begin() as conn:
            plan = await shard_plan(conn, day)
            as_of = await latest_issue_date(conn) or day  # every shard audits as of the same date
        for shard, (lo, hi) in enumerate(plan):
            async with engine.begin() as conn:  # the shard's lock: held until its findings are on record
                if not await locks.try_xact_lock(conn, locks.sweep_shard(day, shard)) or await _shard_done(
                    conn, day, shard
                ):
                    continue
                report = await audit_all(url, as_of, lo=lo, hi=hi)
                await record_findings(await driver_connection(conn), report.findings)
                await _record_shard_done(conn, day, shard, len(plan), report, by or this_process())
            audited.append(shard)
    finally:
        await engine.dispose()
    return audited


async def _shard_done(conn: AsyncConnection, day: date, shard: int) -> bool:
    log = t.activity_log.c
    found = await conn.execute(
        select(log.id).where(log.action == SHARD_DONE, log.entity_id == _shard_entity(day, shard)).limit(1)
    )
    return found.first() is not None


async def _record_shard_done(
    conn: AsyncConnection, day: date, shard: int, shards: int, report: AuditReport, by: str
) -> None:
    """The shard on record with what the audit found now: the digest is built from these rows, whichever
    processes audited the shards."""
    await activity.record(
        conn,
        activity.SYSTEM,
        "bot",
        SHARD_DONE,
        "sweep_shard",
        _shard_entity(day, shard),
        {
            "shard": shard,
            "shards": shards,
            "by": by,
            "as_of": report.as_of,
            "customers": report.customers,
            "findings": [[f.customer_id, f.invoice_id, fmt(money(f.overcharge))] for f in report.findings],
            "refused": [list(r) for r in report.refused],
        },
    )


async def day_result(conn: AsyncConnection, day: date) -> SweepResult | None:
    """The day's sweep from its shards' records, as run_findings_sweep would return it; None while a
    shard is not done (another process is auditing it, or died doing so)."""
    log = t.activity_log.c
    rows = await conn.execute(
        select(log.details)
        .where(log.action == SHARD_DONE, log.entity_id.like(f"{day.isoformat()}:%"))
        .order_by(log.id)
    )
    by_shard = {int(d["shard"]): d for d in rows.scalars()}
    shards = len(await shard_plan(conn, day))
    if set(by_shard) != set(range(shards)):
        return None
    parts = [by_shard[s] for s in range(shards)]  # in id order: the shards are id ranges
    keys = [(invoice, Decimal(overcharge)) for d in parts for _, invoice, overcharge in d["findings"]]
    return SweepResult(
        max(date.fromisoformat(d["as_of"]) for d in parts),
        sum(int(d["customers"]) for d in parts),
        await current_findings(await driver_connection(conn), keys),
        [(str(c), str(why)) for d in parts for c, why in d["refused"]],
    )
