"""How fast `billsleuth ledger import` loads a large ledger, against the floor of COPYing the same rows
(issue 28: goal within 3x the floor and under 400 MB peak RSS, whatever the file's size).

Generates N customers (default 3,000) as benchmarks/audit_sweep.py does (two years of history, plan and
seat changes, pauses, cancellations, coupons, a few percent with a fault), writes them as one
billsleuth-ledger/1 file, then, in fresh processes on fresh migrated databases:

  the import: `billsleuth ledger import FILE --json` (wall time, process start included; peak RSS);
  the re-import of the same file into that database (every record checked and compared, nothing changes);
  the floor: a `python -c` that COPYs exactly the rows the import wrote (dumped from its database with
  COPY TO) into the same tables of a fresh database, nothing checked.

    python benchmarks/ledger_import.py [--customers N] [--repeat 1] [--keep-file PATH]

Not a timed test: a script that prints figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from audit_sweep import Dataset, _run, admin, generate, server_url  # noqa: E402

from agent.database import upgrade_all  # noqa: E402
from engine.db import with_database  # noqa: E402
from engine.interchange import FORMAT_VERSION  # noqa: E402
from engine.ledger_staging import TABLE_ORDER  # noqa: E402
from scenarios.store import ledger_records, price_book_records  # noqa: E402

GOAL_RATIO = 3.0
GOAL_RSS_MB = 400.0

CLI = "import sys; from bot.cli import main; sys.exit(main())"

# The floor: COPY each table's dumped rows into a fresh database, parents first; nothing else.
FLOOR = """
import os, sys
import psycopg
tables, directory = sys.argv[1].split(","), sys.argv[2]
with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
    for table in tables:
        with open(os.path.join(directory, table), "rb") as dump, conn.cursor().copy(
            f"COPY {table} FROM STDIN"
        ) as copy:
            while chunk := dump.read(1 << 20):
                copy.write(chunk)
"""


def write_file(path: Path, customers: int, seed: int, dataset: Dataset) -> int:
    """The generated ledger as one billsleuth-ledger/1 file, streamed chunk by chunk; returns records."""
    count = 0
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"type": "format", "version": FORMAT_VERSION, "source": "benchmark"}) + "\n")
        for record in price_book_records():
            out.write(json.dumps(record) + "\n")
            count += 1
        for ledgers in generate(customers, 0.03, seed, dataset):
            for record in ledger_records(ledgers):
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
                count += 1
    return count


def fresh_database(server: str) -> tuple[str, str]:
    name = f"bs_bench_{uuid.uuid4().hex[:8]}"
    admin(server, f'CREATE DATABASE "{name}"')
    url = with_database(server, name)
    asyncio.run(upgrade_all(url))
    return name, url


def dump(url: str, directory: Path) -> int:
    """Every ledger table's rows, as COPY TO writes them (the floor's input); returns the rows."""
    import psycopg

    rows = 0
    with psycopg.connect(url) as conn:
        for table in TABLE_ORDER:
            with (directory / table).open("wb") as out, conn.cursor().copy(f"COPY {table} TO STDOUT") as copy:
                for chunk in copy:
                    out.write(chunk)
            rows += conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # type: ignore[index]
    return rows


def _backend_seconds(pid: int) -> float | None:
    """User + system CPU of a server process so far, from /proc (None once it has exited)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def backend_cpu(server: str, database: str) -> Iterator[list[float]]:
    """The CPU of every Postgres backend serving `database` while the block runs (yields a one-item list
    filled in at the end): each backend's /proc figures read every 20 ms until it exits, so a backend
    that ends with its client is counted up to its last reading. The server must be on this machine."""
    import psycopg

    seen: dict[int, float] = {}
    done = threading.Event()

    def watch() -> None:
        with psycopg.connect(with_database(server, "postgres"), autocommit=True) as conn:
            while not done.is_set():
                pids = conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", (database,))
                for (pid,) in pids.fetchall():
                    if (used := _backend_seconds(pid)) is not None:
                        seen[pid] = used
                time.sleep(0.02)

    total = [0.0]
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield total
    finally:
        done.set()
        watcher.join()
        total[0] = sum(seen.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--customers", type=int, default=3_000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each (the median is shown)")
    parser.add_argument("--keep-file", type=Path, default=None, help="write the ledger file here and keep it")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bs-ledger-bench-") as scratch, server_url() as server:
        path = args.keep_file or Path(scratch) / "ledger.jsonl"
        dataset = Dataset()
        started = time.perf_counter()
        records = write_file(path, args.customers, args.seed, dataset)
        size_mb = path.stat().st_size / 1e6
        print(
            f"generated {dataset.customers:,} customers, {dataset.invoices:,} invoices: {records:,} records, "
            f"{size_mb:.1f} MB in {time.perf_counter() - started:.1f} s"
        )
        imports, reimports, floors, rss = [], [], [], []
        cpu: dict[str, list[float]] = {"import": [], "re-import": [], "floor": []}  # each process's own
        backend: dict[str, list[float]] = {"import": [], "re-import": [], "floor": []}  # its Postgres's
        load_before = os.getloadavg()[0]
        dumped = Path(scratch) / "dump"
        dumped.mkdir()
        made: list[str] = []
        try:
            for _ in range(args.repeat):
                name, url = fresh_database(server)
                made.append(name)
                with backend_cpu(server, name) as served:
                    seconds, peak, _, out, used = _run(
                        [sys.executable, "-c", CLI, "ledger", "import", str(path), "--json"], url
                    )
                cpu["import"].append(used)
                backend["import"].append(served[0])
                counts = json.loads(out)["counts"]
                imports.append(seconds)
                rss.append(peak)
                with backend_cpu(server, name) as served:
                    seconds, peak, _, out, used = _run(
                        [sys.executable, "-c", CLI, "ledger", "import", str(path), "--json"], url
                    )
                cpu["re-import"].append(used)
                backend["re-import"].append(served[0])
                assert all(c["added"] == c["changed"] == 0 for c in json.loads(out)["counts"].values())
                reimports.append(seconds)
                rss.append(peak)
                rows = dump(url, dumped)
                floor_name, floor_url = fresh_database(server)
                made.append(floor_name)
                with backend_cpu(server, floor_name) as served:
                    seconds, _, _, _, used = _run(
                        [sys.executable, "-c", FLOOR, ",".join(TABLE_ORDER), str(dumped)], floor_url
                    )
                cpu["floor"].append(used)
                backend["floor"].append(served[0])
                floors.append(seconds)
        finally:
            for name in made:
                admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        added = sum(c["added"] for c in counts.values())
        imported, floor, again = (statistics.median(v) for v in (imports, floors, reimports))
        ratio = imported / floor
        print(f"rows written: {rows:,} ({added:,} records added)")
        print(f"floor (COPY of the same rows, fresh process): {floor:.1f} s")
        print(
            f"ledger import: {imported:.1f} s = {ratio:.1f}x the floor (goal <= {GOAL_RATIO:.0f}x: "
            f"{'met' if ratio <= GOAL_RATIO else 'NOT met'}); peak RSS {max(rss):.0f} MB "
            f"(goal < {GOAL_RSS_MB:.0f} MB: {'met' if max(rss) < GOAL_RSS_MB else 'NOT met'})"
        )
        print(f"re-import of the same file (nothing changes): {again:.1f} s = {again / floor:.1f}x the floor")
        # The wall clock on a shared machine is mostly waiting for a core: CPU and load say how much.
        used = ", ".join(f"{name} {statistics.median(v):.1f} s" for name, v in cpu.items())
        print(f"CPU (user+sys) of each client process, Postgres's backend not included: {used}")
        served = ", ".join(f"{name} {statistics.median(v):.1f} s" for name, v in backend.items())
        print(f"CPU of its Postgres backends (from /proc, sampled every 20 ms): {served}")
        totals = {name: [c + b for c, b in zip(cpu[name], backend[name], strict=True)] for name in cpu}
        floor_cpu = statistics.median(totals["floor"])
        for name in ("import", "re-import"):
            ratios = ", ".join(f"{t / f:.2f}x" for t, f in zip(totals[name], totals["floor"], strict=True))
            print(
                f"{name}: client + backend CPU {statistics.median(totals[name]):.1f} s against the floor's "
                f"{floor_cpu:.1f} s; each run against its own floor: {ratios} (goal <= {GOAL_RATIO:.0f}x)"
            )
        print(f"load average (1 min): {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
