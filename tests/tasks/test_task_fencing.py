"""Fenced holds: a run that may have lost its task does not run a ``once`` step, a checkpoint
the store did not take is tried again while the body waits, and a task whose runs keep losing
their hold fails instead of running its steps again."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from engine import Context, MCPServer
from engine.state.seal import KeyRing
from engine.tasks.lease import Lease
from engine.tasks.record import TaskRecord
from engine.tasks.record_store import TaskRecords, changed
from engine.testing import Client
from stores import MemoryStore, Store, StoreUnavailable, TaskRow
from tests.conftest import KEY
from tests.tasks.test_task_lifecycle import until_status

pytestmark = pytest.mark.anyio

LEASE = 10.0


class Monotonic:
    """This process's monotonic clock, as a test moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def a_task(task_id: str = "t1") -> TaskRecord:
    return TaskRecord(
        task_id=task_id,
        target="job",
        arguments={},
        capabilities={},
        protocol="2026-07-28",
        principal=None,
        created=9e9,
        ttl=3600,
        poll_ms=10,
        state=b"\x94\x01\x80\x80\x80",
        round_no=1,
        owner=b"first",
        fence=1,
    )


async def held_task(store: Store, clock: Monotonic) -> tuple[TaskRecords, Lease]:
    records = TaskRecords(store, keys=KeyRing([KEY]))
    record = a_task()
    record.created = 0.0  # kept from the epoch: the record's TTL is not what is tested
    record.ttl = 9e9
    assert await records.save(record, due_in=LEASE)
    return records, Lease(records, record, b"first", LEASE, taken=clock(), clock=clock)


async def runs_its_step(lease: Lease) -> bool:
    """Whether a body at a ``once`` step goes on to run it."""
    ran = False
    with lease.scope:
        await lease.confirm("once#1")
        ran = True
    return ran


async def test_a_run_whose_renewals_are_fresh_and_fence_holds_runs_its_step() -> None:
    clock, store = Monotonic(), MemoryStore()
    _, lease = await held_task(store, clock)
    clock.now += LEASE * 0.9
    assert await runs_its_step(lease)
    assert lease.renewed == clock.now  # the confirmation renewed the hold
    row = await store.get_task("t1")
    assert row is not None and row.due_in is not None and row.due_in > LEASE * 0.99


async def test_a_run_paused_past_its_lease_stops_before_its_step(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, store = Monotonic(), MemoryStore()
    _, lease = await held_task(store, clock)
    clock.now += LEASE  # the process stood still for a lease: another may hold the task now
    assert not await runs_its_step(lease)
    assert lease.lost
    assert "not within its 10 s lease (was this process paused" in caplog.text


async def test_a_run_whose_task_was_taken_over_stops_before_its_step() -> None:
    clock, store = Monotonic(), MemoryStore()
    records, lease = await held_task(store, clock)
    assert await store.renew_task("t1", 1, 0.0)  # its hold lapsed on the store's clock...
    taken = await records.load("t1")
    assert taken is not None
    assert await records.save(changed(taken, owner=b"second", fence=2), due_in=LEASE)  # ...taken
    assert not await runs_its_step(lease)  # fresh by its own clock, but the store said no
    assert lease.lost
    assert not await lease.write(updated=1.0)  # nor does any write of it land


async def test_a_stale_runs_checkpoint_is_refused_by_the_store() -> None:
    clock, store = Monotonic(), MemoryStore()
    records, _ = await held_task(store, clock)
    await store.renew_task("t1", 1, 0.0)
    taken = await records.load("t1")
    assert taken is not None
    assert await records.save(changed(taken, owner=b"second", fence=2), due_in=LEASE)
    row = await store.get_task("t1")
    assert row is not None
    stale = TaskRow("t1", row.version + 1, "working", "job", 0.0, 2.0, b"stale", fence=1)
    assert not await store.put_task(stale, ttl=60, due_in=LEASE)  # whatever its version


class Refusing:
    """A memory store whose task writes fail while ``down`` is set, as a store that restarts
    or runs out of memory does."""

    def __init__(self) -> None:
        self.store = MemoryStore()
        self.down = False
        self.refused = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def put_task(self, row: TaskRow, *, ttl: float, due_in: float | None) -> bool:
        if self.down:
            self.refused += 1
            raise StoreUnavailable("Memory store unavailable: writing a task failed (test)")
        return await self.store.put_task(row, ttl=ttl, due_in=due_in)


async def test_a_checkpoint_the_store_refused_is_kept_once_it_answers_and_the_body_goes_on() -> (
    None
):
    flaky = Refusing()
    effects: list[str] = []
    mcp = MCPServer("jobs", keys=[KEY], store=flaky, task_poll_interval=0.01)  # type: ignore[arg-type]

    @mcp.tool(task=True)
    async def charge(amount: int, ctx: Context) -> str:
        def pay() -> int:
            effects.append(f"charged {amount}")
            flaky.down = True  # the store goes away as the checkpoint is written
            return amount

        paid = await ctx.once(pay)
        return f"paid {paid}"

    async def back_up_later() -> None:
        while flaky.refused < 3:  # noqa: ASYNC110 - the store's count, no event to wait on
            await anyio.sleep(0.01)
        flaky.down = False

    async with Client(mcp, tasks=True) as client, anyio.create_task_group() as tg:
        tg.start_soon(back_up_later)
        task_id = (await client.send("tools/call", {"name": "charge", "arguments": {"amount": 5}}))[
            "taskId"
        ]
        done = await until_status(client, task_id, "completed")
    assert done["result"]["content"][0]["text"] == "paid 5"
    assert effects == ["charged 5"]
    assert flaky.refused >= 3
    assert mcp.core.metrics.value("engine_task_holds_lost_total") == 0


async def test_a_task_taken_over_too_often_fails_with_a_clear_error() -> None:
    store = MemoryStore()
    effects: list[str] = []
    servers = [
        MCPServer(
            "jobs",
            keys=[KEY],
            store=store,
            task_poll_interval=0.01,
            task_lease=0.4,
            max_task_takeovers=1,
        )
        for _ in range(2)
    ]
    for mcp in servers:

        @mcp.tool(task=True)
        async def endless(ctx: Context) -> str:
            await ctx.once(effects.append, "began")
            await anyio.sleep_forever()
            return "never"

    records = TaskRecords(store, keys=KeyRing([KEY]))

    async def lapse(task_id: str) -> None:
        """The runner loses its hold without giving it back, as a paused replica does."""
        with anyio.fail_after(5):
            while True:
                held = await records.load(task_id)
                assert held is not None
                await store.renew_task(task_id, held.fence, 0.0)
                held = await records.load(task_id)
                assert held is not None
                ghost = changed(held, owner=b"ghost", fence=held.fence + 1)
                if await records.save(ghost, due_in=0.0):
                    return
                await anyio.sleep(0.01)

    async with Client(*servers, tasks=True) as client:
        task_id = (await client.send("tools/call", {"name": "endless"}, server=0))["taskId"]
        with anyio.fail_after(5):
            while effects != ["began"]:  # noqa: ASYNC110 - the body's side effect
                await anyio.sleep(0.01)
        await lapse(task_id)  # taken over once: allowed
        with anyio.fail_after(5):
            while sum(s.core.metrics.value("engine_task_takeovers_total") for s in servers) < 1:  # noqa: ASYNC110
                await anyio.sleep(0.01)
        await lapse(task_id)  # a second time: the task fails instead
        failed = await until_status(client, task_id, "failed")
    assert "taken over 1 times" in failed["statusMessage"]
    assert "more than max_task_takeovers (1)" in failed["statusMessage"]
    assert effects == ["began"]  # its once step ran once, whichever replica held it


def test_max_task_takeovers_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert MCPServer("jobs", keys=[KEY]).settings.tasks.max_takeovers == 3
    monkeypatch.setenv("ENGINE_MAX_TASK_TAKEOVERS", "7")
    assert MCPServer("jobs", keys=[KEY]).settings.tasks.max_takeovers == 7
    with pytest.raises(ValueError, match="max_task_takeovers must be a whole number"):
        MCPServer("jobs", keys=[KEY], max_task_takeovers=-1)
