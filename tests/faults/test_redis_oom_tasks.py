"""Redis out of memory (``CONFIG SET maxmemory`` below what it holds, ``noeviction``) while 30
task bodies run on three replicas, for longer than a lease: every replica's ``/healthz`` is 503
while Redis refuses writes and 200 once it has room; then every task completes, or fails with
an error that says why, and no ``once`` step runs twice.

While Redis refuses writes, a body cannot renew its hold, keep a checkpoint nor confirm its
hold before a step: it waits. Its hold lapses on the store's clock meanwhile, and the other
replicas' takeovers are refused too, so the first write that lands once there is room decides
who runs the task on (the fence), and the loser stops before its next step."""

from __future__ import annotations

import time

import anyio
import httpx
import pytest
from redis.asyncio import Redis

from deploy.fleet import Fleet, http_get
from tests.faults.tasks import Jobs

pytestmark = pytest.mark.anyio

TASKS = 30
FULL = 15.0
"""Seconds Redis refuses writes: longer than the 10 s lease."""


def health_of(fleet: Fleet) -> dict[str, int]:
    statuses: dict[str, int] = {}
    for name, replica in fleet.replicas.items():
        try:
            statuses[name] = http_get(replica.port, "/healthz", timeout=5)[0]
        except OSError:
            statuses[name] = 0
    return statuses


async def wait_health(fleet: Fleet, status: int, within: float) -> float:
    """Seconds until every replica's ``/healthz`` answers ``status``."""
    began = time.monotonic()
    seen: dict[str, int] = {}
    while time.monotonic() - began < within:
        seen = await anyio.to_thread.run_sync(health_of, fleet)
        if set(seen.values()) == {status}:
            return time.monotonic() - began
        await anyio.sleep(0.2)
    raise AssertionError(f"/healthz not {status} on every replica within {within} s: {seen}")


@pytest.mark.timeout(240)
async def test_tasks_under_a_redis_out_of_memory_end_clearly_and_repeat_no_once_step(
    tmp_path: object,
) -> None:
    with Fleet(redis="private", workdir=tmp_path / "fleet") as fleet:  # type: ignore[operator]
        assert fleet.private_redis is not None
        admin = Redis.from_url(fleet.private_redis.url)
        jobs = Jobs(fleet)
        clients = [
            httpx.AsyncClient(base_url=replica.base_url, timeout=10)
            for replica in fleet.replicas.values()
        ]
        try:
            for n in range(TASKS):  # bodies of 2 to 6 s: some end before, most during
                await jobs.start(clients[n % 3], f"oom-{n:02d}", 2 + (n % 5))
            used = int((await admin.info("memory"))["used_memory"])
            await admin.config_set("maxmemory", str(used // 2))
            full = time.monotonic()
            to_503 = await wait_health(fleet, 503, 30)
            while time.monotonic() - full < FULL:
                statuses = await anyio.to_thread.run_sync(health_of, fleet)
                assert set(statuses.values()) == {503}, statuses
                await anyio.sleep(0.5)
            await admin.config_set("maxmemory", "0")
            to_200 = await wait_health(fleet, 200, 30)
            async with httpx.AsyncClient(base_url=fleet.base_url, timeout=10) as through_nginx:
                await jobs.wait_ended(through_nginx, 120)
            stall = time.monotonic() - full
        finally:
            for client in clients:
                await client.aclose()
            await admin.aclose()
        effects = jobs.effects()
        logs = "".join(replica.log() for replica in fleet.replicas.values())

    tags = list(jobs.ids)
    ends = {tag: task["status"] for tag, task in jobs.ended.items()}
    assert set(ends) == set(tags)
    failed = {
        tag: jobs.ended[tag].get("error") for tag, status in ends.items() if status != "completed"
    }
    for tag, error in failed.items():  # a task that ends otherwise says why
        assert ends[tag] == "failed" and error and error.get("message"), (tag, jobs.ended[tag])
    assert all(runs == 1 for runs in effects["task-once"].values())
    assert all(runs == 1 for runs in effects["task-done"].values())  # no done step twice
    for tag, status in ends.items():
        if status == "completed":
            assert effects["task-done"].get(tag) == 1
    print(
        f"\nRedis out of memory {FULL:g} s under {TASKS} bodies: /healthz 503 on every replica "
        f"{to_503:.1f} s after, 200 {to_200:.1f} s after it had room; {len(tags) - len(failed)} "
        f"completed, {len(failed)} failed; the last ended {stall:.1f} s after memory ran out; "
        f"takeovers {logs.count('taken over')}, steps that waited for the store to confirm "
        f"their hold {logs.count('did not confirm the hold')}, checkpoints or outcomes not "
        f"kept yet {logs.count('not kept yet, the body waits')}"
    )
