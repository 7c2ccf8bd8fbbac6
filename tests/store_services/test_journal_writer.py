"""The journal: every round of a sampled call, written in the background, dropped when behind."""

from typing import Any

import anyio
import pytest

from engine import MCPServer
from engine.state.seal import KeyRing
from engine.store_services.journal_records import open_rounds, rounds_in
from engine.testing import Client
from examples.bookshop import build as bookshop
from stores import MemoryStore, open_store
from tests.conftest import KEY
from tests.store_services.helpers import YES, first_round, order_server

pytestmark = pytest.mark.anyio


async def test_every_round_is_journaled() -> None:
    store = MemoryStore()
    mcp = order_server(store, [])
    async with Client(mcp, elicitation=lambda p: YES) as client:
        result = await client.call_tool("order_book", {"title": "Neuromancer"})
    [summary] = await store.calls()
    stored = await store.events(summary.call_id)
    assert all(isinstance(e["sealed"], bytes) and "answers" not in e for e in stored)
    events = [r for e in stored for r in open_rounds(e, KeyRing([KEY]))]
    assert summary.target == "order_book"
    assert [e["kind"] for e in events] == ["input_required", "complete"]
    assert events[0]["questions"]["confirm_backorder"]["method"] == "elicitation/create"
    assert events[1]["answers"] == {"confirm_backorder": YES}
    assert events[1]["round"] == 2
    assert events[0]["arguments"] == {"title": "Neuromancer"}  # recorded by default
    assert events[0]["code"] == events[1]["code"]
    assert result.text in events[1]["response"].decode()


async def test_a_served_call_that_ends_soon_is_one_record() -> None:
    store = MemoryStore()
    mcp = order_server(store, [])
    async with mcp.running(), Client(mcp, elicitation=lambda p: YES) as client:
        await client.call_tool("order_book", {"title": "Neuromancer"})
    [summary] = await store.calls()
    [record] = await store.events(summary.call_id)
    assert rounds_in(record) == 2 and record["kind"] == "complete"
    rounds = open_rounds(record, KeyRing([KEY]))
    assert [(r["round"], r["kind"]) for r in rounds] == [(1, "input_required"), (2, "complete")]


async def test_a_call_left_open_is_journaled_once_its_rounds_have_waited(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from engine.store_services import journal_writer

    monkeypatch.setattr(journal_writer, "JOURNAL_HOLD", 0.05)
    written = anyio.Event()

    class WatchedStore(MemoryStore):
        async def append_many(self, items: list[tuple[str, dict[str, Any]]], ttl: float) -> None:
            await super().append_many(items, ttl)
            written.set()

    store = WatchedStore()
    mcp = order_server(store, [])
    async with mcp.running(), Client(mcp, elicitation=lambda p: YES) as client:
        first = await first_round(client)
        assert first["resultType"] == "input_required"
        with anyio.fail_after(10):  # the call stays open: its round is written once held long
            await written.wait()
        [summary] = await store.calls()
        [record] = await store.events(summary.call_id)
    [opened] = open_rounds(record, KeyRing([KEY]))
    assert (opened["round"], opened["kind"]) == (1, "input_required")
    assert b"(not journaled)" in opened["response"]  # no live token in the journal
    assert first["requestState"].encode() not in opened["response"]


async def test_rounds_still_held_are_written_when_the_server_stops() -> None:
    store = MemoryStore()
    mcp = order_server(store, [])
    async with mcp.running(), Client(mcp, elicitation=lambda p: YES) as client:
        await first_round(client)
        assert await store.calls() == []  # held for the call's end
    [summary] = await store.calls()
    assert summary.last_kind == "input_required"


@pytest.mark.parametrize("backend", ["memory", "redis"])
async def test_a_sampled_journal_keeps_whole_calls_and_every_replica_agrees(
    backend: str, redis_url: str
) -> None:
    store = MemoryStore() if backend == "memory" else open_store(redis_url)
    a = bookshop(keys=[KEY], store=store, journal_sample=0.5)
    b = bookshop(keys=[KEY], store=store, journal_sample=0.5)
    # Served, so each replica's journal writer batches its events; rounds alternate replicas.
    async with a.running(), b.running(), Client(a, b, elicitation=lambda p: YES) as client:
        for _ in range(60):
            await client.call_tool("order_book", {"title": "Neuromancer"})
    listed = await store.calls(limit=100)
    assert 15 <= len(listed) <= 45  # about half of the 60 calls
    for call in listed:
        assert (
            services := a.core.runtime.store_services
        ) is not None and services.journal.journals(call.call_id)
        stored = await store.events(call.call_id)  # two replicas' writers: either may be first
        events = [r for e in stored for r in open_rounds(e, KeyRing([KEY]))]
        assert sorted((e["round"], e["kind"]) for e in events) == [
            (1, "input_required"),
            (2, "complete"),
        ]
    if backend == "redis":
        await store.aclose()


@pytest.mark.parametrize("sample", [-0.1, 1.5, float("nan"), True, "half"])
def test_a_journal_sample_outside_0_to_1_is_refused(sample: Any) -> None:
    with pytest.raises(ValueError, match=r"journal_sample must be a number from 0 to 1, got "):
        MCPServer("Shop", keys=[KEY], store=MemoryStore(), journal_sample=sample)


def test_the_journal_sample_can_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGINE_JOURNAL_SAMPLE", "0.25")
    mcp = MCPServer("Shop", keys=[KEY], store=MemoryStore())
    assert (
        services := mcp.core.runtime.store_services
    ) is not None and services.journal.sample == 0.25
    mcp = MCPServer("Shop", keys=[KEY], store=MemoryStore(), journal_sample=1)  # wins
    assert (services := mcp.core.runtime.store_services) is not None and services.journal.journals(
        "any call"
    )
    monkeypatch.setenv("ENGINE_JOURNAL_SAMPLE", "a quarter")
    with pytest.raises(ValueError, match="ENGINE_JOURNAL_SAMPLE must be a number from 0 to 1"):
        MCPServer("Shop", keys=[KEY], store=MemoryStore())


async def test_journal_events_dropped_under_overload_are_counted_and_warned_about_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class StalledStore(MemoryStore):
        async def append_many(self, items: list[tuple[str, dict[str, Any]]], ttl: float) -> None:
            await anyio.sleep_forever()

    mcp = MCPServer("journal", keys=[KEY], store=StalledStore())

    @mcp.tool()
    async def ping() -> str:
        return "pong"

    async with Client(mcp) as client:
        for _ in range(2200):  # over what the writer's queue holds while it is stalled
            assert (await client.call_tool("ping")).content[0]["text"] == "pong"
    dropped = mcp.core.metrics.value("engine_journal_events_dropped_total")
    assert 100 < dropped < 2200
    warnings = [r for r in caplog.records if "journal writers are behind" in r.getMessage()]
    assert len(warnings) == 1  # not one per dropped event


async def test_a_journal_writer_with_whole_batches_waiting_writes_them_without_lingering(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from engine.store_services import journal_writer

    monkeypatch.setattr(journal_writer, "JOURNAL_LINGER", 3600.0)  # a lone event would wait an hour
    written: list[int] = []
    both_written = anyio.Event()

    class CountingStore(MemoryStore):
        async def append_many(self, items: list[tuple[str, dict[str, Any]]], ttl: float) -> None:
            written.append(len(items))
            if len(written) == 2:
                both_written.set()

    mcp = MCPServer("journal", keys=[KEY], store=CountingStore())
    async with mcp.running():
        assert mcp.core.runtime.store_services is not None
        for i in range(2 * journal_writer.JOURNAL_BATCH):
            assert mcp.core.runtime.store_services.journal.enqueue(f"call-{i}", {"n": i})
        with anyio.fail_after(10):
            await both_written.wait()
    assert written == [journal_writer.JOURNAL_BATCH, journal_writer.JOURNAL_BATCH]
