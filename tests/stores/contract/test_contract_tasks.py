"""The `TaskStore` part of the store contract, run against every backend that
tests/stores/conftest.py names, each on its real backend."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from stores import (
    Store,
    TaskRow,
    TaskStore,
)
from tests.stores.contract.helpers import (
    PAST_SHORT_TTL,
    SHORT_TTL,
    Replica,
)
from tests.stores.fake_clock import Elapse

pytestmark = pytest.mark.anyio


def task_row(task_id: str, version: int, status: str = "working", **fields: Any) -> TaskRow:
    values: dict[str, Any] = {
        "target": "slow_compute",
        "created": 1_700_000_000.25,
        "updated": 1_700_000_000.5 + version,
        "record": b"\x00sealed record\xff v%d" % version,
    }
    values.update(fields)
    return TaskRow(task_id, version, status, **values)


async def test_a_task_is_written_over_the_version_before_it_only(store: TaskStore) -> None:
    assert await store.get_task("t1") is None
    first = task_row("t1", 1)
    assert await store.put_task(first, ttl=30, due_in=None)
    assert await store.get_task("t1") == first
    assert not await store.put_task(task_row("t1", 1, "completed"), ttl=30, due_in=None)
    assert not await store.put_task(task_row("t1", 3), ttl=30, due_in=None)
    second = task_row("t1", 2, "input_required")
    assert await store.put_task(second, ttl=30, due_in=None)
    assert not await store.put_task(task_row("t1", 2, "completed"), ttl=30, due_in=None)
    assert await store.get_task("t1") == second
    assert not await store.put_task(task_row("t2", 2), ttl=30, due_in=None)
    assert await store.get_task("t2") is None


async def test_task_fields_keep_every_digit_and_byte(store: TaskStore) -> None:
    row = task_row(
        "t1", 1, target="tool with spaces é", created=1_700_000_000.123456, record=bytes(range(256))
    )
    await store.put_task(row, ttl=30, due_in=None)
    assert await store.get_task("t1") == row


async def test_of_200_concurrent_writers_of_one_version_exactly_one_wins(store: TaskStore) -> None:
    await store.put_task(task_row("t1", 1), ttl=30, due_in=None)
    won: list[int] = []

    async def write(n: int) -> None:
        if await store.put_task(task_row("t1", 2, record=b"writer %d" % n), ttl=30, due_in=None):
            won.append(n)

    async with anyio.create_task_group() as tg:
        for n in range(200):
            tg.start_soon(write, n)
    assert len(won) == 1
    stored = await store.get_task("t1")
    assert stored is not None and stored.record == b"writer %d" % won[0]


async def test_another_replica_reads_and_writes_the_same_tasks(
    backend: tuple[Store, Replica],
) -> None:
    store, replica = backend
    other = await replica()
    await store.put_task(task_row("t1", 1), ttl=30, due_in=0.0)
    assert await other.get_task("t1") == task_row("t1", 1)
    assert await other.due_tasks() == ["t1"]
    assert await other.put_task(task_row("t1", 2, "completed"), ttl=30, due_in=None)
    assert not await store.put_task(task_row("t1", 2), ttl=30, due_in=None)
    assert await store.due_tasks() == []


async def test_due_tasks_are_those_due_by_the_stores_clock_earliest_first(
    store: TaskStore, elapse: Elapse
) -> None:
    await store.put_task(task_row("late", 1), ttl=30, due_in=3 * SHORT_TTL)
    await store.put_task(task_row("early", 1), ttl=30, due_in=0.0)
    await store.put_task(task_row("middle", 1), ttl=30, due_in=SHORT_TTL)
    await store.put_task(task_row("never", 1), ttl=30, due_in=None)
    assert await store.due_tasks() == ["early"]
    await elapse(PAST_SHORT_TTL)
    assert await store.due_tasks() == ["early", "middle"]
    assert await store.due_tasks(limit=1) == ["early"]
    await elapse(3 * SHORT_TTL)
    assert await store.due_tasks() == ["early", "middle", "late"]


async def test_a_read_says_how_long_until_a_task_is_due(store: TaskStore, elapse: Elapse) -> None:
    await store.put_task(task_row("held", 1), ttl=30, due_in=20.0)
    await store.put_task(task_row("waiting", 1, "input_required"), ttl=30, due_in=None)
    held = await store.get_task("held")
    assert held is not None and held.due_in is not None and 19.0 < held.due_in <= 20.0
    waiting = await store.get_task("waiting")
    assert waiting is not None and waiting.due_in is None
    await store.put_task(task_row("lapsing", 1), ttl=30, due_in=SHORT_TTL)
    await elapse(PAST_SHORT_TTL)
    lapsed = await store.get_task("lapsing")
    assert lapsed is not None and lapsed.due_in is not None and lapsed.due_in <= 0


async def test_a_write_moves_or_ends_a_due_time(store: TaskStore, elapse: Elapse) -> None:
    await store.put_task(task_row("t1", 1), ttl=30, due_in=0.0)
    await store.put_task(task_row("t1", 2), ttl=30, due_in=20.0)
    assert await store.due_tasks() == []
    await store.put_task(task_row("t1", 3), ttl=30, due_in=SHORT_TTL)
    await elapse(PAST_SHORT_TTL)
    assert await store.due_tasks() == ["t1"]
    await store.put_task(task_row("t1", 4, "input_required"), ttl=30, due_in=None)
    assert await store.due_tasks() == []


async def test_a_losing_write_leaves_the_due_time_alone(store: TaskStore) -> None:
    await store.put_task(task_row("t1", 1), ttl=30, due_in=None)
    assert not await store.put_task(task_row("t1", 5), ttl=30, due_in=0.0)
    assert await store.due_tasks() == []


# --- tasks: fencing ---


async def test_a_lower_fence_is_refused_whatever_the_version(store: TaskStore) -> None:
    assert await store.put_task(task_row("t1", 1, fence=3), ttl=30, due_in=20.0)
    assert not await store.put_task(task_row("t1", 2, fence=2), ttl=30, due_in=20.0)
    assert await store.put_task(task_row("t1", 2, fence=3), ttl=30, due_in=20.0)
    stored = await store.get_task("t1")
    assert stored is not None and stored.fence == 3


async def test_a_higher_fence_takes_a_task_only_once_its_hold_has_lapsed(
    backend: tuple[Store, Replica], elapse: Elapse
) -> None:
    store, replica = backend
    other = await replica()
    await store.put_task(task_row("t1", 1, fence=1), ttl=30, due_in=SHORT_TTL)
    assert not await other.put_task(task_row("t1", 2, fence=2), ttl=30, due_in=20.0)
    await elapse(PAST_SHORT_TTL)  # the holder did not renew: its hold lapsed
    assert await other.put_task(task_row("t1", 2, fence=2), ttl=30, due_in=20.0)
    assert not await store.put_task(task_row("t1", 3, fence=1), ttl=30, due_in=20.0)
    assert not await store.renew_task("t1", 1, 20.0)  # the run before can do nothing more
    assert await other.renew_task("t1", 2, 20.0)


async def test_a_task_that_is_not_due_takes_a_higher_fence_at_once(store: TaskStore) -> None:
    await store.put_task(task_row("t1", 1, "input_required", fence=1), ttl=30, due_in=None)
    assert await store.put_task(task_row("t1", 2, fence=2), ttl=30, due_in=20.0)
    await store.renew_task("t1", 2, 0.0)  # given back: due at once
    assert await store.put_task(task_row("t1", 3, fence=3), ttl=30, due_in=20.0)


async def test_a_renewal_keeps_a_hold_live_and_leaves_the_version_alone(
    backend: tuple[Store, Replica], elapse: Elapse
) -> None:
    store, replica = backend
    other = await replica()
    await store.put_task(task_row("t1", 1, fence=1), ttl=30, due_in=2 * SHORT_TTL)
    assert await store.renew_task("t1", 1, 30.0)
    await elapse(3 * SHORT_TTL)
    assert await other.due_tasks() == []
    assert not await other.put_task(task_row("t1", 2, fence=2), ttl=30, due_in=20.0)
    assert await store.put_task(task_row("t1", 2, fence=1), ttl=30, due_in=20.0)  # version 1+1


async def test_a_renewal_needs_the_fence_and_a_hold(store: TaskStore) -> None:
    assert not await store.renew_task("missing", 0, 20.0)
    await store.put_task(task_row("t1", 1, fence=4), ttl=30, due_in=20.0)
    assert not await store.renew_task("t1", 3, 20.0)
    assert not await store.renew_task("t1", 5, 20.0)
    assert await store.renew_task("t1", 4, 20.0)
    await store.put_task(task_row("t1", 2, "completed", fence=4), ttl=30, due_in=None)
    assert not await store.renew_task("t1", 4, 20.0)  # it ended: there is no hold to renew
    assert await store.due_tasks() == []


async def test_of_concurrent_takers_of_a_lapsed_hold_exactly_one_wins(store: TaskStore) -> None:
    await store.put_task(task_row("t1", 1, fence=1), ttl=30, due_in=0.0)
    won: list[int] = []

    async def take(n: int) -> None:
        row = task_row("t1", 2, fence=2, record=b"taker %d" % n)
        if await store.put_task(row, ttl=30, due_in=20.0):
            won.append(n)

    async with anyio.create_task_group() as tg:
        for n in range(50):
            tg.start_soon(take, n)
    assert len(won) == 1


async def test_tasks_are_listed_newest_first_by_status(store: TaskStore) -> None:
    await store.put_task(task_row("old", 1, created=100.0), ttl=30, due_in=None)
    await store.put_task(task_row("new", 1, "completed", created=300.0), ttl=30, due_in=None)
    await store.put_task(task_row("mid", 1, created=200.0), ttl=30, due_in=None)
    assert [row.task_id for row in await store.tasks()] == ["new", "mid", "old"]
    assert [row.task_id for row in await store.tasks(limit=2)] == ["new", "mid"]
    assert [row.task_id for row in await store.tasks(status="working")] == ["mid", "old"]
    assert await store.tasks(status="failed") == []


async def test_a_task_expires_after_its_ttl_and_its_id_starts_over(
    store: TaskStore, elapse: Elapse
) -> None:
    await store.put_task(task_row("t1", 1), ttl=SHORT_TTL, due_in=0.0)
    await store.put_task(task_row("t2", 1), ttl=30, due_in=None)
    assert await store.get_task("t1") is not None
    await elapse(PAST_SHORT_TTL)
    assert await store.get_task("t1") is None
    assert await store.due_tasks() == []
    assert [row.task_id for row in await store.tasks()] == ["t2"]
    assert not await store.put_task(task_row("t1", 2), ttl=30, due_in=None)
    assert await store.put_task(task_row("t1", 1, "completed"), ttl=30, due_in=None)


async def test_a_write_keeps_a_task_for_its_new_ttl(store: TaskStore, elapse: Elapse) -> None:
    await store.put_task(task_row("t1", 1), ttl=SHORT_TTL, due_in=None)
    await store.put_task(task_row("t1", 2), ttl=30, due_in=None)
    await elapse(PAST_SHORT_TTL)
    assert await store.get_task("t1") == task_row("t1", 2)


async def test_bad_task_writes_are_refused_with_a_reason(store: TaskStore) -> None:
    with pytest.raises(ValueError, match="task_id must be a non-empty string"):
        await store.put_task(task_row("", 1), ttl=30, due_in=None)
    with pytest.raises(ValueError, match="positive integer"):
        await store.put_task(task_row("t1", 0), ttl=30, due_in=None)
    with pytest.raises(ValueError, match="ttl must be a positive number"):
        await store.put_task(task_row("t1", 1), ttl=0, due_in=None)
    with pytest.raises(TypeError, match="TaskRow"):
        await store.put_task({"task_id": "t1"}, ttl=30, due_in=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="fence is a non-negative integer"):
        await store.put_task(task_row("t1", 1, fence=-1), ttl=30, due_in=None)
    with pytest.raises(ValueError, match="due_in must be a non-negative"):
        await store.put_task(task_row("t1", 1), ttl=30, due_in=-1.0)
    with pytest.raises(ValueError, match="lease must be a non-negative"):
        await store.renew_task("t1", 1, float("nan"))
    with pytest.raises(ValueError, match="task_id must be a non-empty string"):
        await store.get_task("")
    with pytest.raises(ValueError, match="limit must be a positive integer"):
        await store.tasks(limit=0)
