"""Keeping a round's response: sent to the store before the answer, acknowledged after it.

A store that can send a completion without waiting (``send_complete``, as `RedisStore` does
while serving) lets the answer go without a round trip; these tests hold the store's
acknowledgement back and check that nothing a duplicate retry relies on changes.
"""

import logging
from collections.abc import Callable
from typing import Any

import anyio
import pytest

import engine.ledger
from engine.testing import Client, ProtocolError
from stores import Claim, MemoryStore, StoreUnavailable
from tests.test_ledger import YES, first_round, order_server, retry

pytestmark = pytest.mark.anyio

Sent = tuple[tuple[str, int, bytes, bytes, float], Callable[[BaseException | None], None]]


class AcknowledgingStore(MemoryStore):
    """A memory store that takes completions without waiting, and keeps and acknowledges
    each only when the test says so (``acknowledge``)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[Sent] = []
        self.sends = True

    def send_complete(
        self,
        call_id: str,
        round_no: int,
        fingerprint: bytes,
        response: bytes,
        ttl: float,
        then: Callable[[BaseException | None], None],
    ) -> bool:
        if not self.sends:
            return False
        self.sent.append(((call_id, round_no, fingerprint, response, ttl), then))
        return True

    async def acknowledge(self, error: BaseException | None = None) -> None:
        """The oldest completion sent: kept and acknowledged, or failed with ``error``."""
        args, then = self.sent.pop(0)
        if error is None:
            await self.complete(*args)
        then(error)


async def test_the_answer_does_not_wait_for_the_store_to_acknowledge_the_response() -> None:
    counter: list[int] = []
    store = AcknowledgingStore()
    mcp = order_server(store, counter)
    assert mcp.ledger is not None
    mcp.ledger.wait_duplicates = 10
    duplicate: dict[str, Any] = {}
    async with Client(mcp, elicitation=lambda p: YES) as client:
        state = (await first_round(client))["requestState"]
        with anyio.fail_after(5):
            first = await client.send("tools/call", retry(state))
        assert [args[1] for args, _ in store.sent] == [1]  # round 1's response, on its way

        async def again() -> None:
            duplicate.update(await client.send("tools/call", retry(state)))

        async with anyio.create_task_group() as tg:
            tg.start_soon(again)
            await anyio.sleep(0.1)
            assert duplicate == {}  # the round is still claimed: the duplicate waits for it
            await store.acknowledge()
    assert first["content"][0]["text"] == "Backordered 'Neuromancer'; it ships in 2-3 weeks."
    assert duplicate == first
    assert counter == [1]
    assert mcp.ledger._unacknowledged == 0


async def test_a_response_the_store_failed_to_keep_is_kept_later() -> None:
    counter: list[int] = []
    store = AcknowledgingStore()
    mcp = order_server(store, counter)
    async with Client(mcp, elicitation=lambda p: YES) as client:
        state = (await first_round(client))["requestState"]
        first = await client.send("tools/call", retry(state))
        await store.acknowledge(StoreUnavailable("memory store unavailable: complete (test)"))
        with anyio.fail_after(5):
            while True:  # written again in the background, with the store's own `complete`
                again = await client.send("tools/call", retry(state))
                if again["resultType"] == "complete":
                    break
                await anyio.sleep(0.05)
    assert again == first
    assert counter == [1]


async def test_a_store_error_keeping_a_response_is_logged_and_serving_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    counter: list[int] = []
    store = AcknowledgingStore()
    mcp = order_server(store, counter)
    async with Client(mcp, elicitation=lambda p: YES) as client:
        state = (await first_round(client))["requestState"]
        await client.send("tools/call", retry(state))
        with caplog.at_level(logging.ERROR, logger="engine.ledger"):
            await store.acknowledge(ValueError("WRONGTYPE the round key holds a string"))
        assert "could not keep the response of round 1 of call" in caplog.text
        assert "WRONGTYPE" in caplog.text
        assert (await first_round(client))["resultType"] == "input_required"
    assert counter == [1]


async def test_shutting_down_waits_for_the_store_to_acknowledge_what_was_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = AcknowledgingStore()
    mcp = order_server(store, [])
    acknowledged: list[bool] = []

    async def acknowledge_soon() -> None:
        await anyio.sleep(0.2)
        await store.acknowledge()
        acknowledged.append(True)

    with caplog.at_level(logging.WARNING, logger="engine.ledger"):
        async with anyio.create_task_group() as tg:
            async with Client(mcp, elicitation=lambda p: YES) as client:
                state = (await first_round(client))["requestState"]
                await client.send("tools/call", retry(state))
                tg.start_soon(acknowledge_soon)
            assert acknowledged == [True]  # the server stopped only once it was acknowledged
    assert "not acknowledged" not in caplog.text
    assert (await store.claim(*store_round(mcp, state), ttl=30)).status is Claim.DUPLICATE


async def test_shutting_down_retries_a_response_the_store_failed_to_keep(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = AcknowledgingStore()
    mcp = order_server(store, [])
    with caplog.at_level(logging.WARNING, logger="engine.ledger"):
        async with (
            anyio.create_task_group() as tg,
            Client(mcp, elicitation=lambda p: YES) as client,
        ):
            state = (await first_round(client))["requestState"]
            await client.send("tools/call", retry(state))
            outage = StoreUnavailable("memory store unavailable: complete (test)")
            tg.start_soon(store.acknowledge, outage)  # as the server shuts down
    assert (await store.claim(*store_round(mcp, state), ttl=30)).status is Claim.DUPLICATE
    assert "shutting down with store writes not done" not in caplog.text
    assert mcp.ledger is not None and mcp.ledger._unacknowledged == 0


async def test_shutting_down_gives_up_on_an_acknowledgement_that_never_comes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = AcknowledgingStore()
    mcp = order_server(store, [])
    assert mcp.ledger is not None
    async with Client(mcp, elicitation=lambda p: YES) as client:
        state = (await first_round(client))["requestState"]
        await client.send("tools/call", retry(state))
        with caplog.at_level(logging.WARNING, logger="engine.ledger"):
            await mcp.ledger.flush(within=0.1)
        await store.acknowledge()  # late: the server's own shutdown then has nothing to wait for
    assert (
        "shutting down with store writes not done: 1 responses the store has not acknowledged"
        in caplog.text
    )


async def test_a_store_that_fails_to_send_leaves_nothing_owed() -> None:
    class Broken(AcknowledgingStore):
        def send_complete(self, *args: Any) -> bool:
            raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")

    mcp = order_server(Broken(), [])
    assert mcp.ledger is not None
    async with Client(mcp, elicitation=lambda p: YES) as client:
        state = (await first_round(client))["requestState"]
        with pytest.raises(ProtocolError):
            await client.send("tools/call", retry(state))
        assert mcp.ledger._unacknowledged == 0


@pytest.mark.parametrize("why", ["the store cannot send at once", "too many unacknowledged"])
async def test_otherwise_the_answer_waits_until_the_response_is_kept(
    why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = AcknowledgingStore()
    if why == "the store cannot send at once":
        store.sends = False
    else:
        monkeypatch.setattr(engine.ledger, "KEEP_UNACKNOWLEDGED", 0)
    mcp = order_server(store, [])
    async with Client(mcp, elicitation=lambda p: YES) as client:
        state = (await first_round(client))["requestState"]
        final = await client.send("tools/call", retry(state))
        kept = await store.claim(*store_round(mcp, state), ttl=30)
    assert store.sent == []
    assert kept.status is Claim.DUPLICATE and final["resultType"] == "complete"


def store_round(mcp: Any, state: str) -> tuple[str, int, bytes]:
    """The store's key of the round ``state`` was minted for, with the answers ``retry`` sends."""
    from engine.claims import Claims
    from engine.ledger import responses_fingerprint

    claims = Claims.decode(mcp.keys.open(state, mcp.max_token_chars))
    fingerprint = responses_fingerprint({"confirm_backorder": YES})
    return claims.call_id.hex(), claims.round_no, fingerprint


@pytest.mark.parametrize("body", ["small", "over 64 KiB"])
async def test_on_redis_the_response_is_written_to_redis_before_the_answer(
    body: str, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever writes the answer (here the ASGI app's caller, which could send it at once),
    the completion is on Redis's connection first."""
    import json

    from stores import RedisStore, _redis_mux
    from tests.http_helpers import headers_for, request

    written: list[str] = []
    flush = _redis_mux._Wire.flush

    def recorded(self: _redis_mux._Wire) -> None:
        if any(b"EVALSHA" in packed and completion in packed for packed in self.queued):
            written.append("completion")
        flush(self)

    monkeypatch.setattr(_redis_mux._Wire, "flush", recorded)
    store = RedisStore(redis_url)
    completion = store._complete.sha.encode()
    mcp = order_server(store, [])
    if body != "small":
        tool = mcp.tools["order_book"].signature
        counting = tool.fn

        async def long_answer(**kwargs: Any) -> str:
            return str(await counting(**kwargs)) + " " + "x" * 70_000

        tool.fn = long_answer
    app = mcp.streamable_http_app()

    async def post(params: dict[str, Any]) -> dict[str, Any]:
        message = request("tools/call", params, capabilities={"elicitation": {}})
        incoming = [{"type": "http.request", "body": json.dumps(message).encode()}]
        answer: list[bytes] = []

        async def receive() -> dict[str, Any]:
            if incoming:
                return incoming.pop()
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

        async def send(event: dict[str, Any]) -> None:
            if event["type"] == "http.response.body":
                written.append("answer")
                answer.append(event["body"])

        headers = [(k.lower().encode(), v.encode()) for k, v in headers_for(message).items()]
        await app(
            {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}, receive, send
        )
        result: dict[str, Any] = json.loads(b"".join(answer))["result"]
        return result

    try:
        async with mcp.running():
            params = {"name": "order_book", "arguments": {"title": "Neuromancer"}}
            state = (await post(params))["requestState"]
            written.clear()
            final = await post(retry(state))
    finally:
        await store.aclose()
    assert final["content"][0]["text"].startswith("Backordered 'Neuromancer'")
    assert written == ["completion", "answer"]
