"""With a store: state by reference, single-use rounds, one body run per call, the journal."""

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import anyio
import pytest

from engine import Context, MCPServer, Resolve, Sample
from engine.testing import Client, ProtocolError
from engine.types import CreateMessageResult, SamplingMessage, TextContent
from examples.bookshop import build as bookshop
from stores import Claim, MemoryStore, Store, open_store
from tests.conftest import KEY

pytestmark = pytest.mark.anyio

BIG = "x" * 1_000_000
YES = {"action": "accept", "content": {"confirm": True}}


def ask_model() -> Sample:
    return Sample(
        [SamplingMessage(role="user", content=TextContent(text="Write a lot"))], max_tokens=10
    )


def essay_server(store: Store | str | None, counter: list[int]) -> MCPServer:
    from pydantic import BaseModel

    class Ok(BaseModel):
        ok: bool

    mcp = MCPServer("Essays", keys=[KEY], store=store)

    async def confirm(essay: Annotated[CreateMessageResult, Resolve(ask_model)], ctx: Context):
        from engine import Elicit

        return Elicit(f"Publish {len(essay.content.text)} characters?", Ok)  # type: ignore[union-attr]

    @mcp.tool()
    async def publish(
        essay: Annotated[CreateMessageResult, Resolve(ask_model)],
        ok: Annotated[Ok, Resolve(confirm)],
    ) -> str:
        counter.append(1)
        return f"published {len(essay.content.text)} characters"  # type: ignore[union-attr]

    return mcp


def big_answer(params: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": BIG}, "model": "m"}


@pytest.mark.parametrize("backend", ["memory", "redis"])
async def test_a_large_answer_goes_by_reference_and_the_token_stays_small(
    backend: str, redis_url: str
) -> None:
    counter: list[int] = []
    if backend == "memory":
        store = MemoryStore()
        a, b = essay_server(store, counter), essay_server(store, counter)
    else:  # two replicas, each with its own connection to Redis
        a, b = essay_server(redis_url, counter), essay_server(redis_url, counter)
    async with Client(
        a,
        b,
        sampling=big_answer,
        elicitation=lambda p: {"action": "accept", "content": {"ok": True}},
    ) as client:
        result = await client.call_tool("publish", {})
    assert result.text == "published 1000000 characters"
    assert len(result.rounds) == 3
    assert len(result.rounds[1]["requestState"]) <= 300
    assert result.servers == ["0", "1", "0"]


async def test_without_a_store_a_large_state_is_refused_clearly() -> None:
    ok = {"action": "accept", "content": {"ok": True}}
    async with Client(
        essay_server(None, []), sampling=big_answer, elicitation=lambda p: ok
    ) as client:
        result = await client.call_tool("publish", {})
    assert result.is_error
    assert "over the inline limit" in result.text
    assert "Configure a store" in result.text


def order_server(store: Store | str, counter: list[int], **options: Any) -> MCPServer:
    from examples.bookshop import build

    mcp = build(keys=[KEY], store=store, **options)
    original = mcp.tools["order_book"].signature.fn

    async def counting(**kwargs: Any) -> str:
        counter.append(1)
        return await original(**kwargs)

    mcp.tools["order_book"].signature.fn = counting
    return mcp


async def first_round(client: Client) -> dict[str, Any]:
    return await client.send(
        "tools/call", {"name": "order_book", "arguments": {"title": "Neuromancer"}}
    )


def retry(state: str, answer: dict[str, Any] = YES) -> dict[str, Any]:
    return {
        "name": "order_book",
        "arguments": {"title": "Neuromancer"},
        "inputResponses": {"confirm_backorder": answer},
        "requestState": state,
    }


async def test_a_duplicate_final_round_gets_the_same_bytes_and_the_body_runs_once() -> None:
    counter: list[int] = []
    store = MemoryStore()
    a, b = order_server(store, counter), order_server(store, counter)
    async with Client(a, b, elicitation=lambda p: YES) as client:
        state = (await first_round(client))["requestState"]
        first = await client.send("tools/call", retry(state))
        second = await client.send("tools/call", retry(state))
    assert first == second
    assert first["content"][0]["text"] == "Backordered 'Neuromancer'; it ships in 2-3 weeks."
    assert counter == [1]


async def test_different_answers_for_a_used_round_are_refused() -> None:
    counter: list[int] = []
    mcp = order_server(MemoryStore(), counter)
    async with Client(mcp, elicitation=lambda p: YES) as client:
        state = (await first_round(client))["requestState"]
        await client.send("tools/call", retry(state))
        with pytest.raises(ProtocolError) as caught:
            no = {"action": "accept", "content": {"confirm": False}}
            await client.send("tools/call", retry(state, no))
    assert caught.value.message == "Invalid or expired requestState"
    assert counter == [1]


async def test_concurrent_duplicates_run_the_body_once() -> None:
    counter: list[int] = []
    store = MemoryStore()
    servers = [order_server(store, counter) for _ in range(2)]
    original = servers[0].tools["order_book"].signature.fn

    async def slow(**kwargs: Any) -> str:
        await anyio.sleep(0.05)
        return await original(**kwargs)

    servers[0].tools["order_book"].signature.fn = slow
    servers[1].tools["order_book"].signature.fn = slow
    results: list[dict[str, Any]] = []
    async with Client(*servers, elicitation=lambda p: YES) as client:
        state = (await first_round(client))["requestState"]

        async def attempt() -> None:
            results.append(await client.send("tools/call", retry(state)))

        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(attempt)
    finals = [r for r in results if r["resultType"] == "complete"]
    assert counter == [1]
    assert len({str(r) for r in finals}) == 1
    assert len(finals) == 20


async def test_every_round_is_journaled() -> None:
    store = MemoryStore()
    mcp = order_server(store, [])
    async with Client(mcp, elicitation=lambda p: YES) as client:
        result = await client.call_tool("order_book", {"title": "Neuromancer"})
    [summary] = await store.calls()
    events = await store.events(summary.call_id)
    assert summary.target == "order_book"
    assert [e["kind"] for e in events] == ["input_required", "complete"]
    assert events[0]["questions"]["confirm_backorder"]["method"] == "elicitation/create"
    assert events[1]["answers"] == {"confirm_backorder": YES}
    assert events[1]["round"] == 2
    assert events[0]["arguments"] is None
    assert events[0]["code"] == events[1]["code"]
    assert result.text in events[1]["response"].decode()


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
        assert a.runtime.ledger is not None and a.runtime.ledger.journals(call.call_id)
        events = await store.events(call.call_id)  # two replicas' writers: either may be first
        assert sorted((e["round"], e["kind"]) for e in events) == [
            (1, "input_required"),
            (2, "complete"),
        ]
    if backend == "redis":
        await store.aclose()


async def test_with_no_journal_rounds_stay_single_use() -> None:
    counter: list[int] = []
    store = MemoryStore()
    mcp = order_server(store, counter, journal_sample=0)
    async with Client(mcp, elicitation=lambda p: YES) as client:
        state = (await first_round(client))["requestState"]
        first = await client.send("tools/call", retry(state))
        again = await client.send("tools/call", retry(state))
    assert first == again and counter == [1]
    assert await store.calls() == []


@pytest.mark.parametrize("sample", [-0.1, 1.5, float("nan"), True, "half"])
def test_a_journal_sample_outside_0_to_1_is_refused(sample: Any) -> None:
    with pytest.raises(ValueError, match=r"journal_sample .* from 0 .* to 1"):
        MCPServer("Shop", keys=[KEY], store=MemoryStore(), journal_sample=sample)


def test_the_journal_sample_can_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGINE_JOURNAL_SAMPLE", "0.25")
    mcp = MCPServer("Shop", keys=[KEY], store=MemoryStore())
    assert mcp.runtime.ledger is not None and mcp.runtime.ledger.journal_sample == 0.25
    mcp = MCPServer("Shop", keys=[KEY], store=MemoryStore(), journal_sample=1)  # wins
    assert mcp.runtime.ledger is not None and mcp.runtime.ledger.journals("any call")
    monkeypatch.setenv("ENGINE_JOURNAL_SAMPLE", "a quarter")
    with pytest.raises(ValueError, match="ENGINE_JOURNAL_SAMPLE must be a number from 0 to 1"):
        MCPServer("Shop", keys=[KEY], store=MemoryStore())


@pytest.mark.parametrize("backend", ["memory", "redis"])
async def test_notifications_cross_replicas_through_the_store(backend: str, redis_url: str) -> None:
    shared = MemoryStore()

    def replica() -> MCPServer:
        return MCPServer("Bus", keys=[KEY], store=shared if backend == "memory" else redis_url)

    a, b = replica(), replica()
    heard: list[str] = []
    arrived = anyio.Event()

    async def listener(method: str, params: dict[str, Any]) -> None:
        heard.append(method)
        arrived.set()

    b.add_listener(listener)
    async with a.running(), b.running():
        await a.notify_list_changed("tools")
        with anyio.fail_after(2):
            await arrived.wait()
    assert heard == ["notifications/tools/list_changed"]


async def test_a_thousand_duplicate_final_rounds_over_two_replicas_with_redis(
    redis_url: str,
) -> None:
    counter: list[int] = []
    a, b = order_server(redis_url, counter), order_server(redis_url, counter)
    bodies: list[bytes] = []
    async with Client(a, b, elicitation=lambda p: YES) as client:
        state = (await first_round(client))["requestState"]
        limiter = anyio.CapacityLimiter(50)

        async def attempt(index: int) -> None:
            async with limiter:
                for _ in range(50):
                    try:
                        result = await client.send("tools/call", retry(state), server=index % 2)
                    except ProtocolError:
                        raise
                    if result["resultType"] == "complete":
                        bodies.append(str(result).encode())
                        return
                    await anyio.sleep(0.01)

        async with anyio.create_task_group() as tg:
            for index in range(1000):
                tg.start_soon(attempt, index)
    assert counter == [1]
    assert len(bodies) == 1000
    assert len(set(bodies)) == 1


class FlakyStore(MemoryStore):
    """A memory store whose next ``failures`` completions fail as if the backend were down."""

    failures = 0

    async def complete(self, *args: Any, **kwargs: Any) -> None:
        if self.failures:
            self.failures -= 1
            from stores import StoreUnavailable

            raise StoreUnavailable("memory store unavailable: complete failed (test)")
        await super().complete(*args, **kwargs)


async def test_a_response_that_could_not_be_kept_is_delivered_and_kept_later() -> None:
    counter: list[int] = []
    store = FlakyStore()
    mcp = order_server(store, counter)
    mcp.runtime.ledger.wait_duplicates = 0.05  # type: ignore[union-attr]
    async with Client(mcp, elicitation=lambda p: YES) as client:
        state = (await first_round(client))["requestState"]
        store.failures = 2
        first = await client.send("tools/call", retry(state))
        with anyio.fail_after(5):
            while True:
                again = await client.send("tools/call", retry(state))
                if again["resultType"] == "complete":
                    break
                assert again == {
                    "resultType": "input_required",
                    "requestState": state,
                    "_meta": again["_meta"],
                }
                await anyio.sleep(0.05)
    assert first["content"][0]["text"] == "Backordered 'Neuromancer'; it ships in 2-3 weeks."
    assert again == first
    assert counter == [1]


class ScriptedStore(MemoryStore):
    """A memory store whose completions fail as scripted: each entry of ``outcomes`` is the
    exception the next completion raises (``None``: it succeeds); then they all succeed."""

    def __init__(self) -> None:
        super().__init__()
        self.outcomes: list[Exception | None] = []

    async def complete(self, *args: Any, **kwargs: Any) -> None:
        outcome = self.outcomes.pop(0) if self.outcomes else None
        if outcome is not None:
            raise outcome
        await super().complete(*args, **kwargs)


def outage() -> Exception:
    from stores import StoreUnavailable

    return StoreUnavailable("memory store unavailable: complete failed (test)")


@asynccontextmanager
async def answered_while_the_store_fails(
    *failures: Exception,
) -> AsyncIterator[tuple[ScriptedStore, MCPServer, Client, str]]:
    """A served ``order_book`` call whose final round was answered while the store's next
    completions failed with ``failures``: the store, the server, its client and the token."""
    store = ScriptedStore()
    mcp = order_server(store, [])
    async with Client(mcp, elicitation=lambda p: YES) as client:
        state = (await first_round(client))["requestState"]
        store.outcomes = list(failures)
        final = await client.send("tools/call", retry(state))
        assert final["resultType"] == "complete"
        yield store, mcp, client, state


async def kept(store: ScriptedStore, mcp: MCPServer, state: str) -> bool:
    """Whether the store holds the response of the round ``state`` was minted for."""
    return (await store.claim(*round_of(mcp, state), ttl=30)).status is Claim.DUPLICATE


async def test_shutting_down_waits_for_a_response_to_be_kept_once_the_store_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="engine.store_services.ledger"),
        anyio.fail_after(1.5),
    ):
        # Kept at the second retry, 0.2 s after the first.
        async with answered_while_the_store_fails(outage(), outage()) as (store, mcp, _, state):
            pass
    assert await kept(store, mcp, state)
    assert "still to retry" not in caplog.text


async def test_shutting_down_says_which_writes_it_could_not_retry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with answered_while_the_store_fails(*[outage()] * 3) as (store, mcp, _, _state):
        assert mcp.runtime.ledger is not None
        with caplog.at_level(logging.WARNING, logger="engine.store_services.ledger"):
            await mcp.runtime.ledger.flush(within=0.1)
        assert "shutting down with 1 store writes that failed still to retry" in caplog.text
        store.outcomes = []  # back: the server's own shutdown then finds it kept


async def test_shutting_down_retries_at_once_instead_of_waiting_out_the_backoff() -> None:
    # Fails before answering, then retried at once, after 0.2 s and 0.6 s; next at 1.4 s.
    async with answered_while_the_store_fails(*[outage()] * 4) as (store, mcp, _, state):
        assert mcp.runtime.ledger is not None
        for _ in range(200):
            if not store.outcomes:
                break
            await anyio.sleep(0.01)
        with anyio.fail_after(0.5):
            await mcp.runtime.ledger.flush(within=0.4)  # the store is back: kept now, not at 1.4 s
        assert await kept(store, mcp, state)


async def test_a_shutdown_that_comes_as_a_cancellation_still_retries(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with answered_while_the_store_fails(outage(), outage()) as (store, mcp, _, state):
        assert mcp.runtime.ledger is not None
        with anyio.CancelScope() as scope, caplog.at_level(logging.WARNING):
            scope.cancel()
            await mcp.runtime.ledger.flush(within=1.0)
        assert await kept(store, mcp, state)
    assert "still to retry" not in caplog.text


async def test_a_write_the_store_refuses_on_retry_is_logged_and_later_ones_still_retried(
    caplog: pytest.LogCaptureFixture,
) -> None:
    refusal = ValueError("WRONGTYPE the round key holds a string")
    with caplog.at_level(logging.ERROR, logger="engine.store_services.ledger"):
        async with answered_while_the_store_fails(outage(), refusal) as (store, mcp, client, _):
            await retried(mcp)
            later = (await first_round(client))["requestState"]
            store.outcomes = [outage()]
            final = await client.send("tools/call", retry(later))
            await retried(mcp)
            assert await kept(store, mcp, later)
    assert "gave up writing the response of round 1 of call" in caplog.text
    assert "the store refused it" in caplog.text and "WRONGTYPE" in caplog.text
    assert final["resultType"] == "complete"


async def retried(mcp: MCPServer) -> None:
    """Until the server has no failed store write left to retry."""
    assert mcp.runtime.ledger is not None
    for _ in range(200):
        if not mcp.runtime.ledger._retrying:
            return
        await anyio.sleep(0.01)
    raise AssertionError("store writes still being retried after 2 s")


def round_of(mcp: MCPServer, state: str) -> tuple[str, int, bytes]:
    """The store's key of the round ``state`` was minted for, with the answers ``retry`` sends."""
    from engine.state.claims import Claims
    from engine.store_services.ledger import responses_fingerprint

    claims = Claims.decode(mcp.keys.open(state, mcp.settings.tokens.max_token_chars))
    return claims.call_id.hex(), claims.round_no, responses_fingerprint({"confirm_backorder": YES})


async def test_a_round_claimed_by_a_replica_that_died_runs_once_its_lease_lapses() -> None:
    counter: list[int] = []
    store = MemoryStore()
    mcp = order_server(store, counter)
    assert mcp.runtime.ledger is not None
    mcp.runtime.ledger.lease = 0.3
    mcp.runtime.ledger.wait_duplicates = 0.05
    async with Client(mcp, elicitation=lambda p: YES) as client:
        state = (await first_round(client))["requestState"]
        # A replica claimed round 1 of this call with the same answers, then died.
        await store.claim(*round_of(mcp, state), 0.3, owner=b"dead-replica")
        waiting = await client.send("tools/call", retry(state))
        await anyio.sleep(0.35)
        done = await client.send("tools/call", retry(state))
    assert waiting["resultType"] == "input_required" and "inputRequests" not in waiting
    assert done["content"][0]["text"] == "Backordered 'Neuromancer'; it ships in 2-3 weeks."
    assert counter == [1]


async def test_a_long_round_keeps_its_claim_by_renewing_it() -> None:
    counter: list[int] = []
    store = MemoryStore()
    mcp = order_server(store, counter)
    assert mcp.runtime.ledger is not None
    mcp.runtime.ledger.lease = 0.3
    mcp.runtime.ledger.wait_duplicates = 0.05
    original = mcp.tools["order_book"].signature.fn

    async def slow(**kwargs: Any) -> str:
        await anyio.sleep(0.8)
        return await original(**kwargs)

    mcp.tools["order_book"].signature.fn = slow
    results: list[dict[str, Any]] = []
    async with Client(mcp, elicitation=lambda p: YES) as client:
        state = (await first_round(client))["requestState"]

        async def attempt(delay: float) -> None:
            await anyio.sleep(delay)
            results.append(await client.send("tools/call", retry(state)))

        async with anyio.create_task_group() as tg:
            tg.start_soon(attempt, 0)
            tg.start_soon(attempt, 0.6)  # after the first lease would have lapsed
    assert counter == [1]
    kinds = sorted(r["resultType"] for r in results)
    assert kinds == ["complete", "input_required"]


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
    dropped = mcp.metrics.value("engine_journal_events_dropped_total")
    assert 100 < dropped < 2200
    warnings = [r for r in caplog.records if "journal writers are behind" in r.getMessage()]
    assert len(warnings) == 1  # not one per dropped event


async def test_a_journal_writer_with_whole_batches_waiting_writes_them_without_lingering(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from engine.store_services import ledger

    monkeypatch.setattr(ledger, "JOURNAL_LINGER", 3600.0)  # a lone event would wait an hour
    written: list[int] = []
    both_written = anyio.Event()

    class CountingStore(MemoryStore):
        async def append_many(self, items: list[tuple[str, dict[str, Any]]], ttl: float) -> None:
            written.append(len(items))
            if len(written) == 2:
                both_written.set()

    mcp = MCPServer("journal", keys=[KEY], store=CountingStore())
    async with mcp.running():
        assert mcp.runtime.ledger is not None
        for i in range(2 * ledger.JOURNAL_BATCH):
            assert mcp.runtime.ledger.enqueue(f"call-{i}", {"n": i})
        with anyio.fail_after(10):
            await both_written.wait()
    assert written == [ledger.JOURNAL_BATCH, ledger.JOURNAL_BATCH]


@pytest.mark.parametrize("with_store", [False, True])
async def test_rounds_leave_no_reference_cycles_behind(with_store: bool) -> None:
    """Every round is freed as soon as it is answered: nothing waits for the cycle collector,
    whose passes over a busy server's heap would cost more than the rounds themselves."""
    import gc

    counter: list[int] = []
    mcp = order_server(MemoryStore(), counter) if with_store else bookshop(keys=[KEY])
    async with Client(mcp, elicitation=lambda p: YES) as client:
        await client.call_tool("order_book", {"title": "Neuromancer"})  # warm every cache
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            for _ in range(5):
                result = await client.call_tool("order_book", {"title": "Neuromancer"})
                assert (
                    result.content[0]["text"] == "Backordered 'Neuromancer'; it ships in 2-3 weeks."
                )
            await anyio.sleep(0.05)  # the journal writers take their events
            gc.collect()
            left = [type(o).__qualname__ for o in gc.garbage]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
    assert left == []


class SlowToKeepStore(MemoryStore):
    """A memory store that takes a while to keep a round's response."""

    async def complete(self, *args: Any, **kwargs: Any) -> None:
        await anyio.sleep(0.3)
        await super().complete(*args, **kwargs)


async def test_a_client_hanging_up_while_its_response_is_kept_does_not_cut_the_keeping_short() -> (
    None
):
    import json

    from tests.http_helpers import headers_for, request

    counter: list[int] = []
    mcp = order_server(SlowToKeepStore(), counter)
    app = mcp.streamable_http_app()

    async def post(params: dict[str, Any], *, hang_up: bool) -> dict[str, Any]:
        body = request("tools/call", params, capabilities={"elicitation": {}})
        incoming = [{"type": "http.request", "body": json.dumps(body).encode()}]
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            if incoming:
                return incoming.pop()
            if not hang_up:
                await anyio.sleep_forever()
            return {"type": "http.disconnect"}  # the client is gone

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        headers = [(k.lower().encode(), v.encode()) for k, v in headers_for(body).items()]
        scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}
        await app(scope, receive, send)
        if not sent:
            return {}  # cancelled: the client is gone
        result: dict[str, Any] = json.loads(sent[-1]["body"])["result"]
        return result

    async with mcp.running():
        params = {"name": "order_book", "arguments": {"title": "Neuromancer"}}
        state = (await post(params, hang_up=False))["requestState"]
        # The client hangs up while the final round's response is being kept (past the delay
        # after which a request gets a hang-up watcher): the keeping runs to its end.
        await post(retry(state), hang_up=True)
        again = await post(retry(state), hang_up=False)
    assert again["content"][0]["text"] == "Backordered 'Neuromancer'; it ships in 2-3 weeks."
    assert counter == [1]


def test_the_answers_fingerprint_ignores_key_order_and_never_changes() -> None:
    """Replicas of different versions compare fingerprints during a rolling deploy: the value
    for the same answers is fixed, whatever order the keys arrive in."""
    from engine.store_services.ledger import responses_fingerprint

    answers = {"k": {"b": 1, "a": {"z": [{"y": 1, "x": 2}, 3], "c": "d"}}, "j": 2}
    reordered = {"j": 2, "k": {"a": {"c": "d", "z": [{"x": 2, "y": 1}, 3]}, "b": 1}}
    assert responses_fingerprint(answers).hex() == "94efdbcb0d7c8758318bb70fc13089bd"
    assert responses_fingerprint(reordered) == responses_fingerprint(answers)
    assert responses_fingerprint({"confirm_backorder": YES}).hex() == (
        responses_fingerprint(
            {"confirm_backorder": {"content": {"confirm": True}, "action": "accept"}}
        ).hex()
    )
    assert responses_fingerprint({"a": [2, 1]}) != responses_fingerprint({"a": [1, 2]})
