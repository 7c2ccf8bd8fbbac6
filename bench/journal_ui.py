"""How fast the journal page lists calls from a big journal: ``python -m engine journal-ui``
over a SQLite store holding ``--calls`` calls (100,000 by default), each a sealed round of one
of 20 tools, made by one of 50 principals, served by one of 4 replicas.

The store is filled once (reused by a later run with the same size) through the store's own
``append_many``, each event sealed with the keys as a server seals it. Then the page runs as a
process of its own, and the figures are wall times of whole HTTP requests (a fresh request
each, over one kept connection) for:

* ``first``: the first page of 50 calls (the one a browser opens, and polls);
* ``deep``: a page 20 pages down (``before=`` the cursor the pager gives);
* ``tool``: the first page of one tool's calls;
* ``principal``: the first page of one principal's calls (the store does not index principals:
  the page reads calls' events until it has 50, or has looked at 1000);
* ``call``: one call's page.

    python bench/journal_ui.py [--calls 100000] [--requests 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.state.seal import KeyRing  # noqa: E402
from engine.store_services.journal_records import seal_rounds  # noqa: E402
from stores import SQLiteStore  # noqa: E402

KEY = "bench-secret-0123456789abcdef-0123456789abcdef"
BATCH = 2000


def event(i: int, now: float) -> dict[str, Any]:
    return {
        "v": 1,
        "ts": now - (100_000 - i) * 0.5,
        "kind": "complete" if i % 7 else "input_required",
        "target": f"tool_{i % 20}",
        "method": "tools/call",
        "protocol": "2026-07-28",
        "round": 1,
        "arguments": {"title": f"book {i}", "copies": i % 5},
        "arguments_recorded": True,
        "questions": {},
        "answers": {},
        "checkpoints": {},
        "response": b'{"content":[{"type":"text","text":"done"}]}',
        "duration_ms": 1.25,
        "replica": f"replica-{i % 4}",
        "server": "Bench",
        "code": "0123456789abcdef",
        "principal": f"https://issuer.example principal-{i % 50}",
        "has_principal": True,
    }


async def fill(db: Path, calls: int) -> None:
    keys = KeyRing([KEY])
    store = SQLiteStore(db)
    try:
        now = time.time()
        for start in range(0, calls, BATCH):
            items = [
                (f"call-{i:08d}", seal_rounds([event(i, now)], keys, 1 << 20))
                for i in range(start, min(start + BATCH, calls))
            ]
            await store.append_many(items, ttl=7 * 86400)
    finally:
        await store.aclose()


def timed(client: httpx.Client, path: str, requests: int) -> tuple[float, float]:
    warm = client.get(path)
    warm.raise_for_status()
    listed = warm.text.count("<tr data-call-id=")
    if path.startswith("/?"):
        assert listed == 50 or ("principal" in path and listed > 0), (path, listed)
    took = []
    for _ in range(requests):
        started = time.perf_counter()
        response = client.get(path)
        took.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
    took.sort()
    return statistics.median(took), took[int(len(took) * 0.95) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--db", type=Path, default=None)
    args = parser.parse_args()
    db = args.db or Path(tempfile.gettempdir()) / f"engine-journal-ui-bench-{args.calls}.sqlite3"
    if not db.exists():
        started = time.perf_counter()
        anyio.run(fill, db, args.calls)
        print(f"filled {db} with {args.calls} calls in {time.perf_counter() - started:.1f} s")
    port = 18765
    env = {**os.environ, "ENGINE_KEYS": KEY, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "engine", "journal-ui", "--store", f"sqlite:///{db}"]
    page = subprocess.Popen(
        [*command, "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            deadline = time.monotonic() + 30
            while True:
                try:
                    client.get("/static/journal.js").raise_for_status()
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            cursor = 1e18
            for _ in range(20):
                text = client.get(f"/?before={cursor!r}").text
                cursor = float(text.split("before=")[-1].split('"')[0].split("&")[0])
            paths = {
                "first": "/",
                "deep": f"/?before={cursor!r}",
                "tool": "/?tool=tool_7",
                "principal": "/?principal=https%3A%2F%2Fissuer.example+principal-7",
                "call": "/call/call-00099999",
            }
            print(f"{args.calls} calls; ms per request, median and p95 of {args.requests}:")
            for name, path in paths.items():
                median, p95 = timed(client, path, args.requests)
                print(f"  {name:<10} {median:7.1f}  {p95:7.1f}")
    finally:
        page.terminate()
        page.wait(10)


if __name__ == "__main__":
    main()
