"""The call page read from events as a store holds them: rounds in the order of their numbers,
whatever order replicas appended them in, and a task's runs, holds and cancel."""

from __future__ import annotations

import httpx
import pytest

from engine.debug.web.app import JournalSource, ReplaySettings, journal_ui
from stores import MemoryStore, Store


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
    page = await call_page(store, "c1")
    first, second = page.index('id="round-1"'), page.index('id="round-2"')
    assert first < second
    assert "replica first-server" in page[first:second]
    assert "replica late-writer" in page[second:]
    assert "ab" * 16 in page[second:] and "ab" * 16 not in page[first:second]
    lanes = page.index('data-lane="first-server"'), page.index('data-lane="late-writer"')
    assert lanes[0] < lanes[1]
    assert 'class="lane client"' in page  # the gap where the client answered round 1
    await store.aclose()


async def call_page(store: Store, call_id: str) -> str:
    app = journal_ui(JournalSource(lambda: store, lambda: None), ReplaySettings(None, False))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        response = await http.get(f"/call/{call_id}")
    assert response.status_code == 200
    return response.text


@pytest.mark.anyio
async def test_a_cancelled_task_shows_its_runs_holds_and_cancel() -> None:
    store = MemoryStore()
    made = event(1, "r1", 100.0, "task")
    ran = {**event(2, "r1", 101.0, "input_required"), "task": "input_required", "hold": 1}
    ran["takeovers"] = 0
    cancelled = {**event(3, "r2", 150.0, "cancelled"), "task": "cancelled", "hold": 1}
    cancelled["takeovers"] = 0
    for each in (made, ran, cancelled):
        await store.append("t1", each, ttl=60)
    page = await call_page(store, "t1")
    assert "Round 1: made on r1; its body runs next" in page
    assert "Round 2: run on r1 under hold 1, came to input_required" in page
    assert '<li class="cancel">Round 3: cancelled</li>' in page
    assert "taken over" not in page
    await store.aclose()
