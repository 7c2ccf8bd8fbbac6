"""A traced server journals each round's trace id, and the journal page links it to the trace
viewer a template names."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from engine.debug.web.app import JournalSource, ReplaySettings, checked_trace_url, journal_ui
from engine.state.seal import KeyRing
from engine.store_services.journal_records import outline_of
from engine.testing import Client
from examples.bookshop import build
from stores import SQLiteStore
from tests.conftest import KEY

YES = {"action": "accept", "content": {"confirm": True}}
VIEWER = "https://traces.example/trace/{trace_id}?from=journal"


@pytest.mark.anyio
async def test_each_round_links_to_the_calls_trace(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    db = tmp_path / "traced.sqlite3"
    mcp = build(keys=[KEY], store=f"sqlite:///{db}", tracer_provider=provider)
    async with Client(mcp, elicitation=lambda params: YES) as client:
        await client.call_tool("order_book", {"title": "Neuromancer"})
    rounds = [s for s in exporter.get_finished_spans() if s.name == "round order_book"]
    assert len(rounds) == 2
    trace_ids = {f"{span.context.trace_id:032x}" for span in rounds}
    assert len(trace_ids) == 1  # one call, one trace
    [trace_id] = trace_ids

    store = SQLiteStore(db)
    try:
        [listed] = await store.calls()
        [record] = await store.events(listed.call_id)  # one record of the call's rounds
        # in the clear: the page links the trace without the keys
        assert [r.get("trace_id") for r in outline_of(record)] == [trace_id, trace_id]
        app = journal_ui(
            JournalSource(lambda: store, lambda: KeyRing([KEY])),
            ReplaySettings(None, anywhere=False),
            trace_url=checked_trace_url(VIEWER),
        )
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            page = await http.get(f"/call/{listed.call_id}")
    finally:
        await store.aclose()
    link = f'href="https://traces.example/trace/{trace_id}?from=journal"'
    assert page.status_code == 200 and page.text.count(link) == 2


def test_a_trace_url_without_the_id_is_refused() -> None:
    with pytest.raises(ValueError, match=r"with \{trace_id\} where the trace id goes"):
        checked_trace_url("https://traces.example/trace/")
    with pytest.raises(ValueError, match="give an http"):
        checked_trace_url("javascript:alert({trace_id})")
