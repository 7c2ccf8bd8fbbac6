"""What the store keeps of a 2025-11-25 response stream is sealed with the key ring: the store
holds neither a question nor a result in the clear, a replica sharing the keys follows the
stream from it, and an altered or foreign record ends the resumption with a clear error instead
of replaying what it says. Against real replicas over sockets, on one SQLite store."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest

from engine import MCPServer
from examples.bookshop import build as build_bookshop
from tests.abuse.test_abuse_legacy_isolation import (
    TIMEOUT,
    accept,
    bookshop,
    open_session,
    order,
    resumed,
    sse_events,
    user_header,
)
from tests.conftest import OTHER_KEY
from tests.fleet_helpers import serve_asgi

pytestmark = pytest.mark.anyio


@contextlib.asynccontextmanager
async def two_replicas(a: MCPServer, b: MCPServer) -> AsyncIterator[tuple[str, str]]:
    async with (
        serve_asgi(a.streamable_http_app()) as base_a,
        serve_asgi(b.streamable_http_app()) as base_b,
    ):
        yield base_a + "/mcp", base_b + "/mcp"


async def ask(
    http: httpx2.AsyncClient, url: str, headers: dict[str, str], request_id: int = 2
) -> tuple[str, str]:
    """Start a call that asks a question and hang up once it is asked: the stream's id and
    the question's request id."""
    call = order(request_id, "Neuromancer")
    async with http.stream("POST", url, json=call, headers=headers) as got:
        async for event_id, data in sse_events(got):
            if data.get("method") == "elicitation/create":
                assert event_id is not None
                return event_id.rpartition(".")[0], data["id"]
    raise AssertionError("the call asked no question")


async def test_a_kept_stream_is_sealed_and_another_replica_follows_it(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'calls.db'}"
    a, b = bookshop(store=store), bookshop(store=store)
    async with (
        two_replicas(a, b) as (url_a, url_b),
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        alice = await open_session(http, url_a, "alice")
        stream_id, question_id = await ask(http, url_a, alice)
        answered = await http.post(url_a, json=accept(question_id), headers=alice)
        status, events = await resumed(http, url_b, alice, stream_id + ".0")
        assert a.store is not None
        kept = [await a.store.get_blob(f"sse-{stream_id}", n) for n in ("owner", "1", "2")]
    assert answered.status_code == 202
    assert status == 200
    assert [e.get("method") for e in events] == ["elicitation/create", None]
    assert events[-1]["result"]["content"][0]["text"].startswith("Backordered 'Neuromancer'")
    assert all(record is not None for record in kept)
    for record in kept:
        assert record is not None
        for clear in (b"Neuromancer", b"elicitation", b"Backordered", b"jsonrpc"):
            assert clear not in record


async def test_an_altered_event_ends_the_resumption_with_a_clear_error(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'calls.db'}"
    a, b = bookshop(store=store), bookshop(store=store)
    async with (
        two_replicas(a, b) as (url_a, url_b),
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        alice = await open_session(http, url_a, "alice")
        stream_id = (await ask(http, url_a, alice))[0]
        assert b.store is not None
        record = await b.store.get_blob(f"sse-{stream_id}", "1")
        assert record is not None
        altered = record[:-1] + bytes([record[-1] ^ 1])
        await b.store.put_blob(f"sse-{stream_id}", "1", altered, 600)
        status, events = await resumed(http, url_b, alice, stream_id + ".0")
    assert status == 200
    assert len(events) == 1
    assert events[0]["id"] == 2
    assert events[0]["error"]["code"] == -32603
    assert "does not open" in events[0]["error"]["message"]


async def test_an_event_moved_from_another_stream_does_not_open(tmp_path: Path) -> None:
    """Each record is bound to its stream and position: a valid event copied elsewhere is no
    event there."""
    store = f"sqlite:///{tmp_path / 'calls.db'}"
    a, b = bookshop(store=store), bookshop(store=store)
    async with (
        two_replicas(a, b) as (url_a, url_b),
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        alice = await open_session(http, url_a, "alice")
        first = (await ask(http, url_a, alice))[0]
        second = (await ask(http, url_a, alice, request_id=3))[0]
        assert b.store is not None
        record = await b.store.get_blob(f"sse-{first}", "1")
        assert record is not None
        await b.store.put_blob(f"sse-{second}", "1", record, 600)
        status, events = await resumed(http, url_b, alice, second + ".0")
    assert status == 200
    assert [e["error"]["code"] for e in events] == [-32603]


async def test_a_replica_with_other_keys_does_not_serve_the_stream(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'calls.db'}"
    a = bookshop(store=store)
    b = build_bookshop(keys=[OTHER_KEY], principal=user_header, store=store)
    async with (
        two_replicas(a, b) as (url_a, url_b),
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        alice = await open_session(http, url_a, "alice")
        stream_id = (await ask(http, url_a, alice))[0]
        status, events = await resumed(http, url_b, alice, stream_id + ".0")
    assert status == 404
    assert events == []
