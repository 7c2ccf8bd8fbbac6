"""What OpenTelemetry spans cost here, in process: the SDK's own span, and the dispatch of a
2-round call (a memory store, so claims, kept responses and the journal as with Redis) with
tracing off, every call recorded, and one call in a hundred recorded.

* ``span``: ``tracer.start_span(name).end()`` with the SDK's ``TracerProvider``: no processor;
  a ``BatchSpanProcessor`` whose exporter drops every batch; the same with 4 attributes;
* ``dispatch``: µs per round of ``dispatch`` over whole two-round ``order_book`` calls, for
  three servers that take turns in short slices: ``off`` (no provider), ``sdk`` (every span
  recorded into that dropping batch processor) and ``sampled`` (``ParentBased(
  TraceIdRatioBased(0.01))``).

Each figure is the best batch, as in ``bench/micro.py``: on a shared machine the least disturbed.

    python bench/spans.py [--seconds 2]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from loadgen import new_event_loop  # noqa: E402
from micro import BATCH, EXPECTED, _message  # noqa: E402
from servers.ours import build  # noqa: E402

from engine.app import MCPServer  # noqa: E402
from engine.protocol.dispatch import dispatch  # noqa: E402
from engine.protocol.jsonrpc import loads  # noqa: E402
from engine.protocol.modern import Exchange  # noqa: E402


class Dropped(SpanExporter):
    def export(self, spans: Any) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def provider(sampler: Any = None, *, batch: bool = True) -> TracerProvider:
    made = TracerProvider(sampler=sampler)
    if batch:
        made.add_span_processor(BatchSpanProcessor(Dropped()))
    return made


def bench_span(seconds: float) -> dict[str, float]:
    """µs to start and end one span, best of batches of 1,000."""
    attributes: dict[str, Any] = {
        "engine.call_id": "0" * 44,
        "engine.round": 2,
        "engine.replica": "r-1",
        "engine.outcome": "complete",
    }
    cases: dict[str, tuple[TracerProvider, dict[str, Any] | None]] = {
        "no processor": (provider(batch=False), None),
        "batch processor": (provider(), None),
        "batch processor, 4 attributes": (provider(), attributes),
    }
    best: dict[str, float] = {}
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for name, (made, attrs) in cases.items():
            tracer = made.get_tracer("bench")
            t0 = time.perf_counter()
            for _ in range(1000):
                tracer.start_span("store claim", attributes=attrs).end()
            spent = (time.perf_counter() - t0) / 1000 * 1e6
            best[name] = min(best.get(name, spent), spent)
    for made, _ in cases.values():
        made.shutdown()
    return best


async def one_batch(server: MCPServer, first_id: int) -> float:
    """Seconds ``dispatch`` spent on ``BATCH`` two-round calls."""
    clock = time.perf_counter
    spent = 0.0
    for request_id in range(first_id, first_id + BATCH):
        t0 = clock()
        r1 = await dispatch(server.core, _message(request_id), Exchange())
        spent += clock() - t0
        state = loads(r1.body or b"")["result"]["requestState"]
        t0 = clock()
        r2 = await dispatch(server.core, _message(request_id, state), Exchange())
        spent += clock() - t0
        if request_id == first_id:
            assert loads(r2.body or b"")["result"]["content"][0]["text"] == EXPECTED
    return spent


async def bench_dispatch(seconds: float) -> dict[str, float]:
    """µs per round, best batch, the servers taking turns."""
    one_in_a_hundred = ParentBased(TraceIdRatioBased(0.01))
    servers = {
        "off": build("memory://"),
        "sdk": build("memory://", tracer_provider=provider()),
        "sampled": build("memory://", tracer_provider=provider(one_in_a_hundred)),
    }
    best: dict[str, float] = {}
    request_id = 0
    async with contextlib.AsyncExitStack() as stack:
        for server in servers.values():  # running: the journal writers too; then a warm-up
            await stack.enter_async_context(server.running())
            request_id += BATCH
            await one_batch(server, request_id)
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            for name, server in servers.items():
                request_id += BATCH
                per_round = await one_batch(server, request_id) / (2 * BATCH) * 1e6
                best[name] = min(best.get(name, per_round), per_round)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    for name, us in bench_span(args.seconds).items():
        print(f"span, {name}: {us:.1f} µs")
    loop = new_event_loop()
    try:
        results = loop.run_until_complete(bench_dispatch(args.seconds * 3))
    finally:
        loop.close()
    for name, us in results.items():
        print(f"dispatch µs/round, {name}: {us:.1f} ({us / results['off']:.2f}x off)")


if __name__ == "__main__":
    main()
