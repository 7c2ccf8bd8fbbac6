"""Journal events the store refused are counted, and a burst of them is logged once.

The journal never fails a call: when the store refuses its writes (down, out of memory, locked,
its disk full) the events are dropped. Each one counts in
``engine_journal_events_dropped_total``, so a journal that lacks acknowledged calls is never
silent about it; the log says so at the first drop of a burst and once more, with the count,
when the journal is written again.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from engine.store_services import journal_drops
from engine.testing import Client
from stores import MemoryStore
from stores.base import unavailable
from tests.store_services.helpers import YES, order_server

pytestmark = pytest.mark.anyio


class RefusingStore(MemoryStore):
    """A store whose journal writes fail while ``refusing`` (its other operations succeed)."""

    def __init__(self) -> None:
        super().__init__()
        self.refusing = False
        self.written = anyio.Event()

    async def append_many(self, items: list[tuple[str, dict[str, Any]]], ttl: float) -> None:
        if self.refusing:
            raise unavailable("Redis", "append", "OOM")
        await super().append_many(items, ttl)
        self.written.set()


def drop_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if "journal events dropped" in r.getMessage()
        or "journal is written again" in r.getMessage()
    ]


async def settled(store: RefusingStore) -> None:
    """Until the journal writer has sent what is queued (refused or written)."""
    with anyio.fail_after(5):
        while True:
            store.written = anyio.Event()
            with anyio.move_on_after(0.3):
                await store.written.wait()
                continue
            return


async def test_events_the_store_refused_are_counted_and_logged_once_per_burst(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_drops, "BURST_QUIET", 0.0)
    store = RefusingStore()
    mcp = order_server(store, [])
    async with mcp.running(), Client(mcp, elicitation=lambda p: YES) as client:
        await client.call_tool("order_book", {"title": "Neuromancer"})
        await settled(store)
        assert mcp.core.metrics.value("engine_journal_events_dropped_total") == 0

        store.refusing = True
        for _ in range(10):  # 2 rounds each: 20 events refused
            result = await client.call_tool("order_book", {"title": "Neuromancer"})
            assert "Backordered" in result.text  # the calls are served all the same
        await settled(store)
        assert mcp.core.metrics.value("engine_journal_events_dropped_total") == 20
        [started] = drop_lines(caplog)
        assert started.startswith(
            "journal events dropped: the store refused them (Redis store unavailable: append "
            "failed (OOM)); until the journal is written again, drops are counted in "
            "engine_journal_events_dropped_total and not logged"
        )

        store.refusing = False
        await client.call_tool("order_book", {"title": "Neuromancer"})
        await settled(store)
        assert drop_lines(caplog)[1:] == [
            "the journal is written again; 20 journal events were dropped "
            "(engine_journal_events_dropped_total)"
        ]

        store.refusing = True  # a second burst is logged again
        await client.call_tool("order_book", {"title": "Neuromancer"})
        await settled(store)
    assert mcp.core.metrics.value("engine_journal_events_dropped_total") == 22
    assert len(drop_lines(caplog)) == 3


async def test_a_round_journaled_without_the_writers_is_counted_when_refused() -> None:
    store = RefusingStore()
    store.refusing = True
    mcp = order_server(store, [])
    async with Client(mcp, elicitation=lambda p: YES) as client:  # not served: no writers
        await client.call_tool("order_book", {"title": "Neuromancer"})
    assert mcp.core.metrics.value("engine_journal_events_dropped_total") == 2


async def test_a_burst_goes_on_while_drops_keep_coming(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under overload, writes succeed between drops: that ends no burst."""
    drops = journal_drops.JournalDrops(None)
    clock = [100.0]
    monkeypatch.setattr(journal_drops.time, "monotonic", lambda: clock[0])
    for _ in range(50):
        drops.dropped(3, "the journal writers are behind the calls")
        clock[0] += 0.1
        drops.written()
    assert len(drop_lines(caplog)) == 1
    clock[0] += journal_drops.BURST_QUIET
    drops.written()
    assert drop_lines(caplog)[1] == (
        "the journal is written again; 150 journal events were dropped "
        "(engine_journal_events_dropped_total)"
    )
