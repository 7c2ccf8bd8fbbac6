"""In-process micro-benchmarks of the engine alone: no HTTP, no sockets, no uvicorn.

* ``dispatch``: ``engine.protocol.dispatch.dispatch(server, message, Exchange())`` for both
  rounds of ``order_book(Neuromancer)`` (decoded JSON-RPC message in, response bytes out:
  ``_meta`` checks, the round machine, sealing, result serialisation);
* ``call_tool``: ``server.core.operations.call_tool(CallRequest(...))`` for the same two rounds
  (the round machine and sealing, without the JSON-RPC layer);
* ``asgi``: the Streamable HTTP ASGI app called in process with the request a client sends
  (its headers and JSON body), for the same two rounds: everything the server does per
  request except what uvicorn and the socket do;
* ``seal+open``: ``KeyRing.seal`` then ``KeyRing.open`` of 1 KiB and 64 KiB plaintexts.

Work is timed in batches and the best batch is reported (as ``timeit`` does): on a shared
machine the minimum is the figure least disturbed by other processes; the mean is kept too. The
three call benchmarks take turns in short slices, so a slow stretch touches all three alike.

    python bench/micro.py [--seconds 2] [--json] [--profile] [--calls N]

``--profile`` runs the dispatch loop under pyinstrument (bench extra) and prints its tree.
``--calls N`` runs exactly N two-round calls through the ASGI app, untimed and silent, for
valgrind's callgrind: an instruction count repeats exactly, where a time does not, and the
difference between the counts of two N is what those extra calls cost:

    valgrind --tool=callgrind --callgrind-out-file=/dev/null python bench/micro.py --calls 200

``--store sqlite`` runs ``--calls`` against the default store (a SQLite file in a temporary
directory: claims, completions and the journal, with arguments recorded, as ``serve`` does).
``--journal-bytes N`` runs N two-round calls so, lets the journal writers finish, and prints
what the journal takes on disk per call (its table and indexes, from SQLite's ``dbstat``) and
the whole file per call.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from loadgen import META, new_event_loop  # noqa: E402
from servers.ours import KEY, build  # noqa: E402

from engine.calls.reply import CallRequest  # noqa: E402
from engine.protocol.dispatch import dispatch  # noqa: E402
from engine.protocol.jsonrpc import loads  # noqa: E402
from engine.protocol.modern import Exchange  # noqa: E402
from engine.scope import RequestScope  # noqa: E402
from engine.state.seal import KeyRing  # noqa: E402

YES = {"action": "accept", "content": {"confirm": True}}
EXPECTED = "Backordered 'Neuromancer'; it ships in 2-3 weeks."
CAPABILITIES = META["io.modelcontextprotocol/clientCapabilities"]


_HEADERS = [
    (b"host", b"127.0.0.1:8000"),
    (b"content-type", b"application/json"),
    (b"accept", b"application/json, text/event-stream"),
    (b"mcp-protocol-version", b"2026-07-28"),
    (b"mcp-method", b"tools/call"),
    (b"mcp-name", b"order_book"),
]


def _message(request_id: int, state: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {
        "name": "order_book",
        "arguments": {"title": "Neuromancer"},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": CAPABILITIES,
        },
    }
    if state is not None:
        params["inputResponses"] = {"confirm_backorder": YES}
        params["requestState"] = state
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


BATCH = 200
"""Calls per batch; the figure is the best batch (the least disturbed by other work)."""


def _best(batches: list[tuple[float, int]]) -> dict[str, float]:
    rounds = sum(n for _, n in batches)
    best = min(spent / n for spent, n in batches)
    mean = sum(spent for spent, _ in batches) / rounds
    return {"rounds": rounds, "us_per_round": best * 1e6, "mean_us_per_round": mean * 1e6}


async def bench_dispatch(
    seconds: float, batches: list[tuple[float, int]] | None = None
) -> dict[str, float]:
    """µs per round of ``dispatch`` over whole two-round calls (only dispatch is timed)."""
    server = build()
    clock = time.perf_counter
    batches = [] if batches is None else batches
    deadline = clock() + seconds
    request_id = 0
    while clock() < deadline:
        spent = 0.0
        rounds = 0
        for _ in range(BATCH):
            request_id += 1
            first = _message(request_id)
            t0 = clock()
            r1 = await dispatch(server.core, first, Exchange())
            spent += clock() - t0
            state = loads(r1.body or b"")["result"]["requestState"]
            second = _message(request_id, state)
            t0 = clock()
            r2 = await dispatch(server.core, second, Exchange())
            spent += clock() - t0
            rounds += 2
            if request_id == 1:
                text = loads(r2.body or b"")["result"]["content"][0]["text"]
                assert text == EXPECTED, text
        batches.append((spent, rounds))
    return _best(batches)


async def bench_asgi(
    seconds: float,
    batches: list[tuple[float, int]] | None = None,
    calls: int | None = None,
    store: str | None = None,
) -> dict[str, float]:
    """µs per round of the ASGI app over whole two-round calls (only the app call is timed);
    with ``calls``, exactly that many calls whatever the time."""
    server = build(store)
    app = server.streamable_http_app()
    clock = time.perf_counter
    hang_up = asyncio.get_running_loop().create_future()  # the client never hangs up

    async def post(body: bytes) -> bytes:
        messages = [{"type": "http.request", "body": body, "more_body": False}]
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            if messages:
                return messages.pop()
            await hang_up
            return {"type": "http.disconnect"}

        async def send(message: MutableMapping[str, Any]) -> None:
            sent.append(dict(message))

        scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": _HEADERS}
        await app(scope, receive, send)
        assert sent[0]["status"] == 200, sent
        body_sent: bytes = sent[1]["body"]
        return body_sent

    batches = [] if batches is None else batches
    deadline = clock() + seconds
    request_id = 0
    async with server.running():
        while (clock() < deadline) if calls is None else (request_id < calls):
            spent = 0.0
            rounds = 0
            for _ in range(BATCH if calls is None else min(BATCH, calls - request_id)):
                request_id += 1
                first = json.dumps(_message(request_id)).encode()
                t0 = clock()
                r1 = await post(first)
                spent += clock() - t0
                state = loads(r1)["result"]["requestState"]
                second = json.dumps(_message(request_id, state)).encode()
                t0 = clock()
                r2 = await post(second)
                spent += clock() - t0
                rounds += 2
                if request_id == 1:
                    text = loads(r2)["result"]["content"][0]["text"]
                    assert text == EXPECTED, text
            batches.append((spent, rounds))
    return _best(batches)


async def bench_call_tool(
    seconds: float, batches: list[tuple[float, int]] | None = None
) -> dict[str, float]:
    """µs per round of ``server.core.operations.call_tool`` over whole two-round calls."""
    server = build()
    clock = time.perf_counter
    batches = [] if batches is None else batches
    deadline = clock() + seconds
    first_call = True
    while clock() < deadline:
        spent = 0.0
        rounds = 0
        for _ in range(BATCH):
            scope = RequestScope(
                request_id=1,
                method="tools/call",
                protocol_version="2026-07-28",
                capabilities=CAPABILITIES,
            )
            request = CallRequest(
                "tools/call", "order_book", {"title": "Neuromancer"}, None, None, scope
            )
            t0 = clock()
            reply = await server.core.operations.call_tool(request)
            spent += clock() - t0
            assert reply.kind == "input_required", reply
            again = CallRequest(
                "tools/call",
                "order_book",
                {"title": "Neuromancer"},
                {"confirm_backorder": YES},
                reply.request_state,
                scope,
            )
            t0 = clock()
            final = await server.core.operations.call_tool(again)
            spent += clock() - t0
            rounds += 2
            if first_call:
                first_call = False
                assert final.kind == "complete", final
        batches.append((spent, rounds))
    return _best(batches)


def bench_seal(size: int, seconds: float) -> dict[str, float]:
    ring = KeyRing([KEY])
    plaintext = os.urandom(size)
    clock = time.perf_counter
    best_seal = best_open = float("inf")
    deadline = clock() + seconds
    token = ""
    while clock() < deadline:
        t_seal = t_open = 0.0
        for _ in range(50):
            t0 = clock()
            token = ring.seal(plaintext)
            t1 = clock()
            opened = ring.open(token, 1 << 30)
            t2 = clock()
            t_seal += t1 - t0
            t_open += t2 - t1
        assert opened == plaintext
        best_seal = min(best_seal, t_seal / 50)
        best_open = min(best_open, t_open / 50)
    return {
        "bytes": size,
        "token_chars": len(token),
        "seal_us": best_seal * 1e6,
        "open_us": best_open * 1e6,
        "seal_open_us": (best_seal + best_open) * 1e6,
    }


SLICES = 10
"""Each call benchmark runs in this many slices, taken in turn with the others' slices: a
stretch of time when other work slows the machine then slows all three alike."""


def run_all(seconds: float = 2.0) -> dict[str, Any]:
    benches = {"asgi": bench_asgi, "dispatch": bench_dispatch, "call_tool": bench_call_tool}
    collected: dict[str, list[tuple[float, int]]] = {key: [] for key in benches}
    loop = new_event_loop()
    try:
        loop.run_until_complete(bench_dispatch(0.3))  # warm-up: imports, caches, plans
        for _ in range(SLICES):
            for key, bench in benches.items():
                loop.run_until_complete(bench(seconds / SLICES, collected[key]))
    finally:
        loop.close()
    results: dict[str, Any] = {key: _best(batches) for key, batches in collected.items()}
    results["seal_1k"] = bench_seal(1024, seconds / 2)
    results["seal_64k"] = bench_seal(64 * 1024, seconds / 2)
    return results


def profile(seconds: float) -> None:
    from pyinstrument import Profiler

    loop = new_event_loop()
    loop.run_until_complete(bench_dispatch(0.3))
    profiler = Profiler(interval=0.0001, async_mode="disabled")
    profiler.start()
    loop.run_until_complete(bench_dispatch(seconds))
    profiler.stop()
    print(profiler.output_text(unicode=True, color=False, show_all=False))


def journal_bytes(calls: int) -> dict[str, float]:
    """Bytes on disk per two-round call: the journal's table and indexes, and the whole file."""
    import sqlite3
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "calls.db")
        loop = new_event_loop()
        try:
            loop.run_until_complete(bench_asgi(0.0, calls=calls, store=f"sqlite:///{path}"))
        finally:
            loop.close()
        conn = sqlite3.connect(path)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            sizes = dict(conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"))
            (records,) = conn.execute("SELECT count(*) FROM journal").fetchone()
        finally:
            conn.close()
        journal = sum(size for name, size in sizes.items() if "journal" in name)
        return {
            "calls": calls,
            "journal_records": records,
            "journal_bytes_per_call": journal / calls,
            "file_bytes_per_call": os.path.getsize(path) / calls,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--profile", action="store_true", help="pyinstrument the dispatch loop")
    parser.add_argument("--calls", type=int, help="run exactly N calls through the ASGI app")
    parser.add_argument("--store", choices=["sqlite"], help="--calls against the default store")
    parser.add_argument("--journal-bytes", type=int, metavar="N", help="journal bytes per call")
    args = parser.parse_args()
    # Inline state on purpose: the warning every server made here would log is not news.
    logging.getLogger("engine.app").setLevel(logging.ERROR)
    logging.getLogger("engine.seal").setLevel(logging.ERROR)
    if args.journal_bytes is not None:
        print(json.dumps(journal_bytes(args.journal_bytes)))
        return
    if args.calls is not None:
        import tempfile

        with tempfile.TemporaryDirectory() as directory:
            store = None if args.store is None else f"sqlite:///{directory}/calls.db"
            loop = new_event_loop()
            try:
                loop.run_until_complete(bench_asgi(0.0, calls=args.calls, store=store))
            finally:
                loop.close()
        return
    if args.profile:
        profile(args.seconds)
        return
    results = run_all(args.seconds)
    if args.json:
        print(json.dumps(results))
        return
    for key in ("asgi", "dispatch", "call_tool"):
        r = results[key]
        print(
            f"{key:10s} order_book: {r['us_per_round']:7.1f} µs/round "
            f"(best batch; mean {r['mean_us_per_round']:.1f})"
        )
    for key in ("seal_1k", "seal_64k"):
        r = results[key]
        print(
            f"seal+open {r['bytes'] // 1024:3d} KiB: {r['seal_open_us']:7.1f} µs "
            f"(seal {r['seal_us']:.1f}, open {r['open_us']:.1f}; token {r['token_chars']} chars)"
        )


if __name__ == "__main__":
    main()
