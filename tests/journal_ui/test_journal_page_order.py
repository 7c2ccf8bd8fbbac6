"""A call's rounds on the page in the order of their numbers, whatever order replicas appended
their events in."""

from __future__ import annotations

import httpx
import pytest

from engine.debug.web.app import JournalSource, ReplaySettings, journal_ui
from stores import MemoryStore


def event(number: int, replica: str, ts: float, kind: str) -> dict[str, object]:
    return {
        "round": number,
        "kind": kind,
        "ts": ts,
        "duration_ms": 2.0,
        "replica": replica,
        "target": "order_book",
        "server": "Bookshop",
    }


@pytest.mark.anyio
async def test_rounds_appended_out_of_order_show_in_order() -> None:
    store = MemoryStore()
    traced = {**event(2, "late-writer", 110.0, "complete"), "trace_id": "ab" * 16}
    await store.append("c1", traced, ttl=60)
    await store.append("c1", event(1, "first-server", 100.0, "input_required"), ttl=60)
    app = journal_ui(JournalSource(lambda: store, lambda: None), ReplaySettings(None, False))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        page = (await http.get("/call/c1")).text
    first, second = page.index('id="round-1"'), page.index('id="round-2"')
    assert first < second
    assert "replica first-server" in page[first:second]
    assert "replica late-writer" in page[second:]
    assert "ab" * 16 in page[second:] and "ab" * 16 not in page[first:second]
    lanes = page.index('data-lane="first-server"'), page.index('data-lane="late-writer"')
    assert lanes[0] < lanes[1]
    assert 'class="lane client"' in page  # the gap where the client answered round 1
    await store.aclose()
