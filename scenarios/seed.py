"""Rebuild the demo dataset: price book, the scenario ledgers (the 100, then the extra kinds), and their
ground-truth files.

Everything the dataset owns is replaced in one transaction: the ledger and everything that hangs off it
(credit notes, their requests and approvals, cases, the audit log, Slack event ids). Refused unless forced:
a database someone else filled (dataset_info seeded_by is not billsleuth), and one holding an issued
credit note (money that left; erasing it would also reset what counts as issued today).

The activity log is never erased, forced or not: it is append-only (the database refuses TRUNCATE too)
and outlives any ledger. A reseed that erases anything appends a `ledger.reseeded` row naming who, the
seed, how many rows of each table went, and every issued note erased (id, amount, currency, issued_at), so
the daily credit limit still counts credit issued today before the reseed (approvals.limits).

Sequences (credit note and case numbers) are not restarted: graph checkpoints are keyed by case id and
live outside this reset, so reusing a case number could resume a stale thread; and the log keeps naming
the erased notes, so their numbers stay theirs.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Table, func, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from approvals import activity
from approvals.identity import os_account
from engine import locks
from engine import schema as t
from engine.db import create_engine
from scenarios.dataset import generate, write_scenario_files
from scenarios.extra_kinds import EXTRA_VARIANTS
from scenarios.faults import INJECTORS
from scenarios.generator import AS_OF, BENIGN_KINDS, DEFAULT_SEED, Scenario
from scenarios.store import load_dataset

SEEDED_BY = "billsleuth"

# Every table the dataset owns; TRUNCATE … CASCADE also empties any later table that references these.
DATASET_TABLES: tuple[Table, ...] = (
    t.approvals,
    t.credit_note_requests,
    t.credit_notes,
    t.cases,
    t.outbox,  # changes of those cases Slack has yet to show: gone with them
    t.sweep_findings,  # findings about this ledger's invoices
    t.audit_log,
    t.slack_events,
    t.payments,
    t.invoice_lines,
    t.invoices,
    t.subscription_events,
    t.subscriptions,
    t.customers,
    t.coupons,
    t.plans,
    t.tax_rates,
    t.dataset_info,
)


class ReseedRefused(RuntimeError):
    """Reseeding would erase something that needs force (the message is one line naming it)."""


class ForeignDatabaseError(ReseedRefused):
    """The database holds a ledger this seeder did not write; replacing it needs force."""


class IssuedCreditNotesError(ReseedRefused):
    """The database holds issued credit notes; erasing them needs force."""


@dataclass(frozen=True)
class SeedResult:
    seed: int
    kinds: dict[str, int]  # scenario kind → how many
    customers: int
    invoices: int
    payments: int
    scenarios_dir: Path | None
    files: list[Path]

    @property
    def scenarios(self) -> int:
        return sum(self.kinds.values())

    def summary(self) -> str:
        def listing(kinds: list[str]) -> str:
            return ", ".join(f"{kind} {self.kinds[kind]}" for kind in kinds)

        faulty = [kind for kind in self.kinds if kind in INJECTORS]
        benign = [kind for kind in self.kinds if kind in BENIGN_KINDS]
        extra = [kind for kind in self.kinds if kind in EXTRA_VARIANTS]
        where = f"files in {self.scenarios_dir}" if self.scenarios_dir else "no scenario files written"
        more = (
            f", {sum(self.kinds[k] for k in extra)} beyond one complaint ({listing(extra)})" if extra else ""
        )
        return (
            f"seeded {self.scenarios} scenarios (seed {self.seed}, as of {AS_OF}): "
            f"{sum(self.kinds[k] for k in faulty)} with a fault ({listing(faulty)}), "
            f"{sum(self.kinds[k] for k in benign)} without ({listing(benign)}){more}; "
            f"{self.customers} customers, {self.invoices} invoices, {self.payments} payments; {where}"
        )


async def seeded_by(conn: AsyncConnection) -> str | None:
    query = select(t.dataset_info.c.value).where(t.dataset_info.c.key == "seeded_by")
    return (await conn.execute(query)).scalar_one_or_none()


async def check_replaceable(conn: AsyncConnection, force: bool) -> None:
    """Refuse to wipe issued credit notes, or a ledger someone else wrote (empty or our own is fine)."""
    if force:
        return
    issued = await issued_notes(conn)
    if issued:
        shown = ", ".join(note["id"] for note in issued[:3]) + (", …" if len(issued) > 3 else "")
        raise IssuedCreditNotesError(
            f"this database holds {len(issued)} issued credit note(s) ({shown}); reseeding would erase "
            "them; use --force (force=True) to reseed anyway (the activity log is kept)"
        )
    if await seeded_by(conn) == SEEDED_BY:
        return
    # Every other ledger row hangs off a customer, so customers tell whether there is a ledger at all.
    customers = (await conn.execute(select(func.count()).select_from(t.customers))).scalar_one()
    if customers:
        raise ForeignDatabaseError(
            f"this database already holds a ledger ({customers} customers) that billsleuth seed did not "
            "write; use --force (force=True) to wipe it and seed anyway"
        )


async def issued_notes(conn: AsyncConnection) -> list[dict[str, object]]:
    notes = t.credit_notes.c
    query = (
        select(notes.id, notes.invoice_id, notes.amount, notes.currency, notes.issued_at)
        .where(notes.status == "issued")
        .order_by(notes.id)
    )
    return [dict(row._mapping) for row in await conn.execute(query)]


async def row_counts(conn: AsyncConnection) -> dict[str, int]:
    """How many rows each dataset table holds (the ones holding any): what a wipe would erase."""
    counts = {}
    for table in DATASET_TABLES:
        n = (await conn.execute(select(func.count()).select_from(table))).scalar_one()
        if n:
            counts[table.name] = n
    return counts


async def wipe(conn: AsyncConnection) -> None:
    names = ", ".join(f'"{table.name}"' for table in DATASET_TABLES)
    await conn.execute(text(f"TRUNCATE TABLE {names} CASCADE"))


async def reseed(
    conn: AsyncConnection, scenarios: list[Scenario], seed: int, force: bool = False, actor: str | None = None
) -> None:
    """Inside the caller's transaction: check, wipe, write the price book, ledgers and dataset_info, and
    put the reseed on record when it erased anything."""
    # Two seeders at once would otherwise both pass the check and interleave their rebuilds.
    await locks.xact_lock(conn, locks.LEDGER)
    await check_replaceable(conn, force)
    erased, erased_issued = await row_counts(conn), await issued_notes(conn)
    await wipe(conn)
    await load_dataset(conn, [scenario.ledger for scenario in scenarios])
    await conn.execute(
        t.dataset_info.insert(),
        [
            {"key": "seeded_by", "value": SEEDED_BY},
            {"key": "seed", "value": str(seed)},
            {"key": "as_of", "value": AS_OF.isoformat()},
        ],
    )
    if erased:  # seeding an empty database erases nothing and leaves the log as it was
        details = {"seed": seed, "forced": force, "erased": erased, "erased_issued": erased_issued}
        actor_id = actor or os_account()
        await activity.record(conn, activity.USER, actor_id, "ledger.reseeded", "dataset", str(seed), details)


def _stage(directory: Path, scenarios: list[Scenario]) -> Path:
    """Write the files into a hidden directory beside their destination (same file system)."""
    directory.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".seeding-", dir=directory))
    try:
        write_scenario_files(staging, scenarios)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging


def _publish(staging: Path, directory: Path) -> list[Path]:
    """Swap the staged files in for the directory's S*.json (renames within one file system)."""
    for stale in directory.glob("S*.json"):
        stale.unlink()
    published = []
    for staged in sorted(staging.glob("S*.json")):
        published.append(staged.replace(directory / staged.name))
    staging.rmdir()
    return published


async def seed_database(
    libpq_url: str,
    seed: int = DEFAULT_SEED,
    scenarios_dir: Path | None = None,
    force: bool = False,
    actor: str | None = None,
) -> SeedResult:
    """Rebuild the dataset for `seed` in one transaction; then put S001.json … in scenarios_dir (if given).

    The files are written to a staging directory first, so a failure on either side leaves the old
    database and the old files as they were. Raises ReseedRefused (ForeignDatabaseError for someone
    else's ledger, IssuedCreditNotesError for issued notes) unless forced. `actor` (default: the OS user)
    is who the `ledger.reseeded` row names.
    """
    scenarios = generate(seed)
    staging = _stage(scenarios_dir, scenarios) if scenarios_dir is not None else None
    engine = create_engine(libpq_url)
    try:
        async with engine.begin() as conn:
            await reseed(conn, scenarios, seed, force, actor)
    except BaseException:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        await engine.dispose()
    files = _publish(staging, scenarios_dir) if staging is not None and scenarios_dir is not None else []
    return SeedResult(
        seed=seed,
        kinds=_count_kinds(scenarios),
        customers=len(scenarios),
        invoices=sum(len(s.ledger.invoices) for s in scenarios),
        payments=sum(len(s.ledger.payments) for s in scenarios),
        scenarios_dir=scenarios_dir,
        files=files,
    )


def _count_kinds(scenarios: list[Scenario]) -> dict[str, int]:
    counts = Counter(scenario.kind for scenario in scenarios)
    return {kind: counts[kind] for kind in [*INJECTORS, *BENIGN_KINDS, *EXTRA_VARIANTS] if counts[kind]}
