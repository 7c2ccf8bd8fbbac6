"""The journal's size cap under full load: does the store file stay near ``journal_max_bytes``?

Serves the bench bookshop the default way, ``python -m engine serve`` with its embedded SQLite
store (in a file of its own here, not the one in your data directory), with
``ENGINE_JOURNAL_MAX_BYTES`` set, and drives it with the bench's load generator (``--connections``
keep-alive connections running whole 2-round ``order_book`` calls back to back) for
``--duration`` seconds. Every ``--interval`` seconds it reads the sizes of the database file and
of its write-ahead log; at the end it prints their largest and last values against the cap, the
calls served, and the server's ``/metrics``: calls purged at the cap, journal events dropped.

    .venv/bin/python bench/journal_cap.py                     # 10 minutes, a 64 MiB cap
    .venv/bin/python bench/journal_cap.py --duration 60 --cap-mib 16

Exit status 1 when a call failed, the server dropped journal events, the journal was never
trimmed (the run did not test the cap), or the file (database and log together) was more than
``--tolerance`` (10 %) past the cap in any sample. Raw samples go to
``bench/results/journal-cap-<time>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import sqlite3
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import loadgen
import run

MIB = 1024 * 1024


@dataclass
class Sample:
    seconds: float
    db_bytes: int
    wal_bytes: int
    purged: int | None
    """``engine_journal_calls_purged_total`` then (``None``: ``/metrics`` did not answer)."""

    @property
    def total(self) -> int:
        return self.db_bytes + self.wal_bytes


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def metric(port: int, name: str) -> float | None:
    """One counter of the server's ``/metrics``; ``None`` when it cannot be read."""
    try:
        with run._LOCAL.open(f"http://{run.HOST}:{port}/metrics", timeout=10) as response:
            exposition = response.read().decode()
    except OSError:
        return None
    for line in exposition.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def file_contents(store: Path) -> tuple[int, int, int, dict[str, int]]:
    """Pages, free pages, the page size and the bytes of each table and index (with its
    indexes under its own name where SQLite has ``dbstat``) of the stopped server's file."""
    conn = sqlite3.connect(store)
    try:
        pages, free, page_size = (
            int(conn.execute(f"PRAGMA {pragma}").fetchone()[0])
            for pragma in ("page_count", "freelist_count", "page_size")
        )
        try:
            rows = conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
        except sqlite3.OperationalError:  # built without dbstat
            rows = []
    finally:
        conn.close()
    return pages, free, page_size, {name: int(size) for name, size in rows}


async def load_and_sample(
    port: int, pid: int, store: Path, args: argparse.Namespace
) -> tuple[loadgen.RunResult, list[Sample]]:
    """The load for ``args.duration`` seconds, and the file's sizes every ``args.interval``."""
    wal = Path(f"{store}-wal")
    samples: list[Sample] = []
    started = time.monotonic()
    load = asyncio.ensure_future(
        loadgen.run_load(
            run.HOST,
            port,
            loadgen.WORKLOADS["two_round"],
            server="journal-cap",
            server_pid=pid,
            connections=args.connections,
            warmup=0.0,
            duration=args.duration,
        )
    )

    async def sample() -> Sample:
        purged = await asyncio.to_thread(metric, port, "engine_journal_calls_purged_total")
        elapsed = round(time.monotonic() - started, 1)
        count = None if purged is None else int(purged)
        return Sample(elapsed, file_size(store), file_size(wal), count)

    last_print = -args.print_every
    while not load.done():
        samples.append(await sample())
        s = samples[-1]
        if s.seconds - last_print >= args.print_every:
            last_print = s.seconds
            run.log(
                f"{s.seconds:7.0f} s  database {s.db_bytes / MIB:7.1f} MiB  log "
                f"{s.wal_bytes / MIB:6.1f} MiB  both {s.total / MIB:7.1f} MiB  "
                f"purged {s.purged}"
            )
        await asyncio.wait({load}, timeout=args.interval)
    samples.append(await sample())
    return load.result(), samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of load (600)")
    parser.add_argument("--cap-mib", type=float, default=64.0, help="journal_max_bytes, MiB")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between samples")
    parser.add_argument("--print-every", type=float, default=30.0, help="seconds between lines")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--tolerance", type=float, default=0.10, help="allowed share past the cap")
    parser.add_argument("--keep", action="store_true", help="keep the store file afterwards")
    args = parser.parse_args()
    cap = int(args.cap_mib * MIB)
    run.ensure_server_stack()
    run.RESULTS.mkdir(exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    folder = Path(tempfile.mkdtemp(prefix="journal-cap-", dir=run.RESULTS))
    store = folder / "calls.sqlite3"
    spec = run.ServerSpec(
        "journal-cap",
        "python -m engine serve (SQLite)",
        sys.executable,
        ["-m", "engine", "serve", "bench/servers/ours.py:build", "--store", f"sqlite:///{store}"],
        ["two_round"],
        "ours",
        env={"ENGINE_JOURNAL_MAX_BYTES": str(cap), "ENGINE_KEYS": run.KEY},
    )
    command = "python bench/journal_cap.py " + " ".join(sys.argv[1:])
    run.log(
        f"journal_max_bytes {cap:,} ({args.cap_mib:g} MiB); {args.duration:g} s of 2-round "
        f"calls on {args.connections} connections; store {store}; load {run.loadavg()}"
    )
    try:
        with run.serving(spec, folder) as (port, pid):
            loop = loadgen.new_event_loop()
            try:
                result, samples = loop.run_until_complete(load_and_sample(port, pid, store, args))
            finally:
                loop.close()
            purged = metric(port, "engine_journal_calls_purged_total")
            dropped = metric(port, "engine_journal_events_dropped_total")
        pages, free, page_size, tables = file_contents(store)
    finally:
        if not args.keep:
            run.remove_sqlite(store)
    summary = result.summary()
    reached = next((s.seconds for s in samples if s.purged), None)  # its first trim
    peak_db = max(s.db_bytes for s in samples)
    peak_total = max(s.total for s in samples)
    failed = []
    if not summary["valid"]:
        failed.append(f"{summary['failures']} failed calls: {summary['errors'][:2]}")
    if dropped:
        failed.append(f"{dropped:.0f} journal events dropped")
    if reached is None:
        failed.append("the journal was never trimmed: run longer, or lower --cap-mib")
    if peak_total > cap * (1 + args.tolerance):
        failed.append(f"the file reached {peak_total / cap:.3f} of the cap")
    report = {
        "command": command,
        "date": dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "machine": run.machine_info(),
        "cap_bytes": cap,
        "calls": summary["calls"],
        "calls_per_s": summary["calls_per_s"],
        "failures": summary["failures"],
        "purged": purged,
        "journal_events_dropped": dropped,
        "cap_reached_after_s": reached,
        "peak_db_bytes": peak_db,
        "peak_db_and_log_bytes": peak_total,
        "final_db_bytes": samples[-1].db_bytes,
        "final_log_bytes": samples[-1].wal_bytes,
        "final_pages_in_use_bytes": (pages - free) * page_size,
        "final_free_pages_bytes": free * page_size,
        "final_bytes_by_table": tables,
        "samples": [asdict(s) for s in samples],
        "failed": failed,
    }
    out = run.RESULTS / f"journal-cap-{stamp}.json"
    out.write_text(json.dumps(report, indent=1))
    last = samples[-1]
    lines = [
        "",
        f"cap                         {cap / MIB:9.1f} MiB",
        f"calls served                {summary['calls']:>9,} ({summary['calls_per_s']:,.0f}/s, "
        f"{summary['failures']} failed)",
        f"calls purged at the cap     {purged if purged is None else f'{purged:9,.0f}'}",
        f"journal events dropped      {dropped if dropped is None else f'{dropped:9,.0f}'}",
        "first trimmed after         " + ("never" if reached is None else f"{reached:9.0f} s"),
        f"largest database            {peak_db / MIB:9.1f} MiB ({peak_db / cap:.3f} of the cap)",
        f"largest database + log      {peak_total / MIB:9.1f} MiB ({peak_total / cap:.3f})",
        f"last database + log         {last.total / MIB:9.1f} MiB ({last.total / cap:.3f}; "
        f"log {last.wal_bytes / MIB:.1f} MiB)",
        f"pages in use at the end     {(pages - free) * page_size / MIB:9.1f} MiB "
        f"(free pages {free * page_size / MIB:.1f} MiB)",
    ]
    biggest = sorted(tables.items(), key=lambda kv: -kv[1])[:4]
    if biggest:
        lines.append(
            "of which                    "
            + ", ".join(f"{name} {size / MIB:.1f} MiB" for name, size in biggest)
        )
    lines.append(f"raw samples: {out.relative_to(run.ROOT)}")
    run.log("\n".join(lines))
    for reason in failed:
        run.log(f"FAILED: {reason}")
    if args.keep:
        run.log(f"store kept: {store}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
