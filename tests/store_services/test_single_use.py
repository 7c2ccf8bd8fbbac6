"""Single-use rounds: one body run per round, duplicates answered byte for byte, leases."""

from typing import Any

import anyio
import pytest

from engine.testing import Client, ProtocolError
from stores import MemoryStore
from tests.store_services.helpers import YES, first_round, order_server, retry, round_of
from tests.stores.fake_clock import FakeClock

pytestmark = pytest.mark.anyio


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


async def test_a_round_claimed_by_a_replica_that_died_runs_once_its_lease_lapses() -> None:
    counter: list[int] = []
    clock = FakeClock()
    store = MemoryStore(clock=clock.now)
    mcp = order_server(store, counter)
    assert mcp.core.runtime.store_services is not None
    mcp.core.runtime.store_services.claims.wait_duplicates = 0.05
    async with Client(mcp, elicitation=lambda p: YES) as client:
        state = (await first_round(client))["requestState"]
        # A replica claimed round 1 of this call with the same answers, then died.
        await store.claim(*round_of(mcp, state), 30, owner=b"dead-replica")
        waiting = await client.send("tools/call", retry(state))
        clock.advance(29)
        still_waiting = await client.send("tools/call", retry(state))
        clock.advance(1.5)  # the dead replica's lease lapses
        done = await client.send("tools/call", retry(state))
    assert still_waiting == waiting
    assert waiting["resultType"] == "input_required" and "inputRequests" not in waiting
    assert done["content"][0]["text"] == "Backordered 'Neuromancer'; it ships in 2-3 weeks."
    assert counter == [1]


async def test_a_long_round_keeps_its_claim_by_renewing_it() -> None:
    counter: list[int] = []
    store = MemoryStore()
    mcp = order_server(store, counter)
    assert mcp.core.runtime.store_services is not None
    mcp.core.runtime.store_services.claims.lease = 0.3
    mcp.core.runtime.store_services.claims.wait_duplicates = 0.05
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
    from engine.store_services.single_use import responses_fingerprint

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


# --- fencing: once steps run only while the round's claim is this attempt's ---


def once_server(
    store: MemoryStore, effects: list[str], arrived: anyio.Event, gate: anyio.Event
) -> Any:
    """A tool that asks, then, in its second round, waits at ``gate`` before a once step."""
    from pydantic import BaseModel

    from engine import Context, MCPServer
    from tests.conftest import KEY

    class Go(BaseModel):
        go: bool

    mcp = MCPServer("fenced", keys=[KEY], store=store)

    @mcp.tool()
    async def ship(ctx: Context) -> str:
        answer = await ctx.elicit("Ship it?", Go)
        arrived.set()
        await gate.wait()
        await ctx.once(effects.append, "shipped")
        return f"shipped: {answer.action}"

    return mcp


async def test_a_round_whose_claim_was_taken_by_a_retry_stops_before_its_once_step(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from engine.state.claims import Claims
    from engine.store_services.single_use import responses_fingerprint

    store, effects, arrived, gate = MemoryStore(), [], anyio.Event(), anyio.Event()
    mcp = once_server(store, effects, arrived, gate)
    answer = {"action": "accept", "content": {"go": True}}
    async with Client(mcp, elicitation=lambda params: answer) as client:
        first = await client.send("tools/call", {"name": "ship", "arguments": {}})
        (key,) = first["inputRequests"]
        claims = Claims.decode(mcp.keys.open(first["requestState"], 10_000))
        call_id, round_no = claims.call_id.hex(), claims.round_no
        fingerprint = responses_fingerprint({key: answer})
        second = {
            "name": "ship",
            "arguments": {},
            "inputResponses": {key: answer},
            "requestState": first["requestState"],
        }
        errors: list[ProtocolError] = []

        async def attempt() -> None:
            try:
                await client.send("tools/call", second)
            except ProtocolError as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(attempt)
            with anyio.fail_after(5):  # the round holds its claim and waits at the gate
                await arrived.wait()
            # Its claim lapsed meanwhile (a paused replica), and a retry took the round.
            await store.release(call_id, round_no, fingerprint)
            await store.claim(call_id, round_no, fingerprint, 30, owner=b"the retry")
            gate.set()
    assert effects == []  # the step did not run here: the retry's replica runs it
    (error,) = errors
    assert error.code == -32603 and "claim lapsed while it ran" in error.message
    assert "step 'once#2' does not run, the round stops" in caplog.text


async def test_a_claim_renewed_long_ago_is_not_confirmed_without_asking_the_store() -> None:
    from engine.store_services.single_use import ClaimLapsed

    store = MemoryStore()
    mcp = order_server(store, [])
    assert mcp.core.runtime.store_services is not None
    claims = mcp.core.runtime.store_services.claims
    admission = await claims.admit("call-1", 1, b"fp")
    hold = admission.hold
    assert hold is not None
    await claims.confirm(hold, "once#1")  # fresh, and the store still has it as ours
    hold.renewed -= claims.lease  # a lease without a renewal: the process was paused
    with pytest.raises(ClaimLapsed):
        await claims.confirm(hold, "once#2")
