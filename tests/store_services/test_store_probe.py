"""``/healthz`` on a store that is slow to write: the checks share one probe, and each answers
within the health timeout whatever the store does."""

import time

import anyio
import pytest

from engine import MCPServer
from engine.runtime import HEALTH_TIMEOUT
from engine.store_services.store_probe import STOPPED, StoreProbe
from stores import MemoryStore
from stores.base import StoreUnavailable
from tests.conftest import KEY

pytestmark = pytest.mark.anyio


class SlowStore(MemoryStore):
    """A store whose write probe takes ``delay`` seconds, then fails when ``broken``."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay
        self.broken = False
        self.pings = 0

    async def ping(self) -> None:
        self.pings += 1
        await anyio.sleep(self.delay)
        if self.broken:
            raise StoreUnavailable("the disk is full")


async def test_checks_that_arrive_together_share_one_probe_and_each_answer_is_fresh() -> None:
    store = SlowStore(0.2)
    probe = StoreProbe(store, timeout=1.0)
    answers: list[str | None] = []

    async def check() -> None:
        answers.append(await probe.check())

    async with anyio.create_task_group() as tg:
        await tg.start(probe.run)
        async with anyio.create_task_group() as checks:
            for _ in range(20):
                checks.start_soon(check)
        assert answers == [None] * 20 and store.pings == 1
        store.broken = True  # the next check probes again: no answer is kept
        assert await probe.check() == "unavailable: the disk is full"
        assert store.pings == 2
        tg.cancel_scope.cancel()


async def test_a_probe_stuck_on_the_store_answers_503_in_time_and_goes_on() -> None:
    store = SlowStore(1.0)
    probe = StoreProbe(store, timeout=0.2)
    async with anyio.create_task_group() as tg:
        await tg.start(probe.run)
        started = time.monotonic()
        assert await probe.check() == "unavailable: no answer within 0.2 s"
        assert time.monotonic() - started < 0.5
        assert await probe.check() is not None  # its probe waits for the stuck one: none piles up
        assert store.pings == 1
        store.delay = 0
        with anyio.fail_after(5):
            while await probe.check() is not None:  # the slow write goes through in the end
                pass
        assert store.pings >= 2  # and the answer that says so comes from a fresh probe
        tg.cancel_scope.cancel()


async def test_a_server_answers_health_from_its_probe_within_the_health_timeout() -> None:
    store = SlowStore(0)
    mcp = MCPServer("shop", keys=[KEY], store=store)
    async with mcp.running():
        store.delay = 3 * HEALTH_TIMEOUT
        started = time.monotonic()
        healthy, details = await mcp.core.health()
        assert not healthy
        assert details["store"] == f"unavailable: no answer within {HEALTH_TIMEOUT:g} s"
        assert time.monotonic() - started < HEALTH_TIMEOUT + 0.5
        store.delay = 0


async def test_an_unexpected_error_of_the_probe_is_a_503_that_says_what_happened() -> None:
    class OddStore(MemoryStore):
        async def ping(self) -> None:
            raise OSError("no such device")

    mcp = MCPServer("shop", keys=[KEY], store=OddStore())
    async with mcp.running():
        healthy, details = await mcp.core.health()
        assert not healthy and details["store"] == "unavailable: OSError: no such device"
        assert not (await mcp.core.health())[0]  # and the prober serves the next check too


async def test_a_check_whose_probe_the_server_stopped_is_not_told_the_store_is_healthy() -> None:
    store = SlowStore(10.0)
    probe = StoreProbe(store, timeout=5.0)
    answers: list[str | None] = []

    async def check() -> None:
        answers.append(await probe.check())

    async with anyio.create_task_group() as checks, anyio.create_task_group() as server:
        await server.start(probe.run)
        checks.start_soon(check)  # its probe runs, on a store that takes 10 s
        await anyio.sleep(0.1)
        checks.start_soon(check)  # this one waits for the next probe
        await anyio.sleep(0.1)
        server.cancel_scope.cancel()  # the server stops
    assert answers == [STOPPED, STOPPED] and store.pings == 1
