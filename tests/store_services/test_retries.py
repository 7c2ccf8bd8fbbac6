"""Store writes retried while the store is down, and waited for (briefly) at shutdown."""

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from engine import MCPServer
from engine.testing import Client
from stores import Claim, MemoryStore
from tests.store_services.helpers import YES, first_round, order_server, retry, round_of

pytestmark = pytest.mark.anyio


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
    mcp.core.runtime.store_services.claims.wait_duplicates = 0.05  # type: ignore[union-attr]
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
        caplog.at_level(logging.WARNING, logger="engine.store_services.retries"),
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
        assert mcp.core.runtime.store_services is not None
        with caplog.at_level(logging.WARNING, logger="engine.store_services.retries"):
            await mcp.core.runtime.store_services.flush(within=0.1)
        assert "shutting down with 1 store writes that failed still to retry" in caplog.text
        store.outcomes = []  # back: the server's own shutdown then finds it kept


async def test_shutting_down_retries_at_once_instead_of_waiting_out_the_backoff() -> None:
    # Fails before answering, then retried at once, after 0.2 s and 0.6 s; next at 1.4 s.
    async with answered_while_the_store_fails(*[outage()] * 4) as (store, mcp, _, state):
        assert mcp.core.runtime.store_services is not None
        for _ in range(200):
            if not store.outcomes:
                break
            await anyio.sleep(0.01)
        with anyio.fail_after(0.5):
            services = mcp.core.runtime.store_services
            await services.flush(within=0.4)  # the store is back: kept now, not at 1.4 s
        assert await kept(store, mcp, state)


async def test_a_shutdown_that_comes_as_a_cancellation_still_retries(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with answered_while_the_store_fails(outage(), outage()) as (store, mcp, _, state):
        assert mcp.core.runtime.store_services is not None
        with anyio.CancelScope() as scope, caplog.at_level(logging.WARNING):
            scope.cancel()
            await mcp.core.runtime.store_services.flush(within=1.0)
        assert await kept(store, mcp, state)
    assert "still to retry" not in caplog.text


async def test_a_write_the_store_refuses_on_retry_is_logged_and_later_ones_still_retried(
    caplog: pytest.LogCaptureFixture,
) -> None:
    refusal = ValueError("WRONGTYPE the round key holds a string")
    with caplog.at_level(logging.ERROR, logger="engine.store_services.retries"):
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
    assert mcp.core.runtime.store_services is not None
    for _ in range(200):
        if not mcp.core.runtime.store_services.retries.pending:
            return
        await anyio.sleep(0.01)
    raise AssertionError("store writes still being retried after 2 s")
