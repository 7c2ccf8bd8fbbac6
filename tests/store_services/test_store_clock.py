"""How far a replica's clock is from its store's: measured, shown in ``/metrics`` and, beyond a
quarter of a lease, in ``/healthz``."""

import time

import pytest

from engine import MCPServer
from engine.store_services.store_clock import StoreClock
from stores import MemoryStore
from tests.conftest import KEY

pytestmark = pytest.mark.anyio


class BehindStore(MemoryStore):
    """A store whose clock is ``behind`` seconds behind this process's."""

    def __init__(self, behind: float) -> None:
        super().__init__()
        self.behind = behind

    async def clock(self) -> float:
        return time.time() - self.behind


async def test_a_skew_beyond_the_tolerance_is_shown_and_one_within_it_is_not() -> None:
    store = BehindStore(30.0)
    clock = StoreClock(store, tolerance=2.5)
    skew = await clock.measure()
    assert skew is not None and 29.5 < skew < 30.5
    assert clock.details() == {"seconds": pytest.approx(30, abs=0.5), "tolerance": 2.5}
    name, value = clock.gauge()[-1].split()
    assert name == "engine_store_clock_skew_seconds" and float(value) == pytest.approx(30, abs=0.5)
    store.behind = 1.0
    await clock.measure()
    assert clock.details() is None


async def test_healthz_and_metrics_show_the_skew_of_a_server() -> None:
    mcp = MCPServer("skewed", keys=[KEY], store=BehindStore(-90.0))  # this replica 90 s behind
    services = mcp.core.runtime.store_services
    assert services is not None
    await services.clock.measure()
    healthy, details = await mcp.core.runtime.health()
    assert healthy  # leases are decided on the store's clock: worth a look, not a 503
    assert details["clock_skew"]["seconds"] == pytest.approx(-90, abs=0.5)
    assert details["clock_skew"]["tolerance"] == 2.5  # a quarter of the 10 s leases
    (gauge,) = [
        line
        for line in mcp.core.metrics.exposition().splitlines()
        if line.startswith("engine_store_clock_skew_seconds ")
    ]
    assert float(gauge.split()[1]) == pytest.approx(-90, abs=0.5)


async def test_every_store_tells_a_time_a_replica_can_compare_with() -> None:
    clock = StoreClock(MemoryStore(), tolerance=2.5)
    skew = await clock.measure()
    assert skew is not None and abs(skew) < 0.5
