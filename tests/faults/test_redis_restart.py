"""Redis killed (SIGKILL, AOF ``always``) while 30 task bodies run on three replicas, and started
again 3 s later: every task completes, and no ``once`` step runs twice. A body whose step ran
while Redis was away waits for its checkpoint to be kept; one about to run a step while the
store cannot confirm its hold waits, or stops before the step."""

from __future__ import annotations

import time

import anyio
import httpx
import pytest

from deploy.fleet import Fleet
from tests.faults.tasks import Jobs

pytestmark = pytest.mark.anyio

TASKS = 30
DOWN = 3.0
"""Seconds Redis is away: the issue's."""
START = 5.0
"""Seconds after the first body starts that the first done step comes."""


@pytest.mark.timeout(180)
async def test_a_redis_killed_and_restarted_under_running_tasks_repeats_no_once_step(
    tmp_path: object,
) -> None:
    with Fleet(redis="private", workdir=tmp_path / "fleet") as fleet:  # type: ignore[operator]
        jobs = Jobs(fleet)
        clients = [
            httpx.AsyncClient(base_url=replica.base_url, timeout=10)
            for replica in fleet.replicas.values()
        ]
        try:
            began = time.monotonic()
            for n in range(TASKS):
                # Every body's done step (a confirmation, the step, its checkpoint) falls from
                # 5 to 8.5 s after the first was answered: most of them while Redis is away.
                spread = START + (n % 8) / 2 - (time.monotonic() - began)
                await jobs.start(clients[n % 3], f"redis-{n:02d}", max(0.5, spread))
            await anyio.sleep(max(0.0, START + 0.5 - (time.monotonic() - began)))
            fleet.kill_redis()
            killed = time.monotonic()
            await anyio.sleep(DOWN)
            fleet.start_redis()
            async with httpx.AsyncClient(base_url=fleet.base_url, timeout=10) as through_nginx:
                await jobs.wait_ended(through_nginx, 90)
            stall = time.monotonic() - killed
        finally:
            for client in clients:
                await client.aclose()
        effects = jobs.effects()
        logs = "".join(replica.log() for replica in fleet.replicas.values())

    tags = list(jobs.ids)
    statuses = {tag: task["status"] for tag, task in jobs.ended.items()}
    assert statuses == dict.fromkeys(tags, "completed"), statuses
    assert effects["task-once"] == dict.fromkeys(tags, 1)
    assert effects["task-done"] == dict.fromkeys(tags, 1)  # no done step twice
    assert "not kept, the run stops" not in logs  # the run no longer gives up on a checkpoint
    print(
        f"\nRedis killed for {DOWN:g} s under {TASKS} bodies: all completed, each once step "
        f"once; the last ended {stall:.1f} s after the kill; steps waited for the store to "
        f"confirm their hold {logs.count('did not confirm the hold')} times, checkpoints or "
        f"outcomes to be kept {logs.count('not kept yet, the body waits')} times, runs stopped "
        f"before a step {logs.count('does not run here')} times"
    )
