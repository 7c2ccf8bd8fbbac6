"""Tasks on a live fleet: three replicas behind nginx on Redis, one SIGKILLed while it runs
bodies; a cancel sent to one replica stops the body that another runs.

The tasks are ``job`` of ``examples/fleet_server.py``: a hold (``ctx.once``), a question, some
work, a done record (``ctx.once``). The replicas' side-effect logs say how often each ``once``
step ran, and the store's journal how often each task's completion was recorded, whatever
happened to the processes that ran them.
"""

from __future__ import annotations

import signal
from collections import Counter
from typing import Any

import anyio
import httpx
import pytest

from deploy.fleet import Fleet
from engine.handlers.task_policy import EXTENSION
from stores import RedisStore
from tests.e2e.driver import REPORT, Numbers
from tests.http_helpers import assert_result, post, request

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

CAPABILITIES: dict[str, Any] = {"extensions": {EXTENSION: {}}, "elicitation": {}}
LEASE = 2.0
"""``ENGINE_TASK_LEASE`` of the replicas: how soon a dead replica's tasks are taken over."""
GO = {"action": "accept", "content": {"go": True}}


@pytest.fixture
def task_fleet(tmp_path: Any) -> Any:
    with Fleet(
        redis="private", workdir=tmp_path / "fleet", env={"ENGINE_TASK_LEASE": str(LEASE)}
    ) as started:
        yield started


def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return request(method, params, capabilities=CAPABILITIES)


async def until(
    client: httpx.AsyncClient, task_id: str, statuses: set[str], seconds: float = 30
) -> dict[str, Any]:
    with anyio.fail_after(seconds):
        while True:
            task = assert_result(await post(client, rpc("tasks/get", {"taskId": task_id})))
            if task["status"] in statuses:
                return task
            await anyio.sleep(0.1)


@pytest.mark.timeout(120)
async def test_fifty_tasks_answered_elsewhere_survive_a_sigkilled_replica(
    task_fleet: Fleet,
) -> None:
    fleet = task_fleet
    tags = [f"task-{n:02d}" for n in range(50)]
    names = list(fleet.replicas)
    direct = {name: httpx.AsyncClient(base_url=fleet.replicas[name].base_url) for name in names}
    created_by: dict[str, str] = {}
    answered_by: dict[str, str] = {}
    task_ids: dict[str, str] = {}
    async with httpx.AsyncClient(base_url=fleet.base_url, timeout=10) as through_nginx:
        for tag in tags:
            call = rpc("tools/call", {"name": "job", "arguments": {"tag": tag, "seconds": 6}})
            response = await post(through_nginx, call)
            made = assert_result(response)
            assert made["resultType"] == "task"
            task_ids[tag] = made["taskId"]
            created_by[tag] = response.headers["x-engine-replica"]
        assert len(set(created_by.values())) == 3  # nginx spread them

        for n, tag in enumerate(tags):  # each answered on a replica that did not create it
            asked = await until(through_nginx, task_ids[tag], {"input_required"})
            (key,) = asked["inputRequests"]
            others = [name for name in names if name != created_by[tag]]
            answered_by[tag] = others[n % 2]
            update = rpc("tasks/update", {"taskId": task_ids[tag], "inputResponses": {key: GO}})
            assert_result(await post(direct[answered_by[tag]], update))

        running = Counter(answered_by.values())
        victim_name, stranded = running.most_common(1)[0]
        victim = fleet.replicas[victim_name]
        victim.signal(signal.SIGKILL)  # its bodies are in their 6 seconds of work
        assert await anyio.to_thread.run_sync(victim.wait, 10) == -signal.SIGKILL

        finals = {
            tag: await until(through_nginx, task_ids[tag], {"completed", "failed", "cancelled"})
            for tag in tags
        }
        effects = assert_result(
            await post(
                through_nginx,
                rpc("tools/call", {"name": "side_effects", "arguments": {"prefix": "task-"}}),
            )
        )["structuredContent"]
    for client in direct.values():
        await client.aclose()

    for tag in tags:
        task = finals[tag]
        assert task["status"] == "completed", task
        text = task["result"]["content"][0]["text"]
        assert text.startswith(f"{tag} done (hold "), text
    assert effects["task_once"] == dict.fromkeys(tags, 1)  # no hold placed twice
    assert effects["task_done"] == dict.fromkeys(tags, 1)  # no body finished twice
    taken_over = [tag for tag in tags if answered_by[tag] == victim_name]
    assert len(taken_over) == stranded >= 1
    for tag in taken_over:  # finished by another replica than the one killed under it
        assert victim_name not in finals[tag]["result"]["content"][0]["text"]

    store = RedisStore(fleet.store_url)
    try:
        kinds = {tag: [e["kind"] for e in await store.events(task_ids[tag])] for tag in tags}
    finally:
        await store.aclose()
    assert {tag: k.count("complete") for tag, k in kinds.items()} == dict.fromkeys(tags, 1)
    assert all(k[0] == "task" for k in kinds.values())  # journaled as rounds of their calls

    REPORT.append(
        Numbers(
            test="tasks: SIGKILL while bodies run",
            calls=len(tags),
            rounds=sum(len(k) for k in kinds.values()),
            replicas_hit=3,
            calls_across_replicas=len(tags),
            duplicate_executions=sum(n - 1 for n in effects["task_once"].values()),
            duplicates_served=0,
            failures=sum(1 for task in finals.values() if task["status"] != "completed"),
            note=(
                f"every task answered on a replica that did not create it; killed "
                f"{victim_name} running {stranded} bodies, all taken over after a {LEASE:g} s "
                "lease and finished once"
            ),
        )
    )


@pytest.mark.timeout(60)
async def test_a_cancel_sent_to_one_replica_stops_the_body_another_runs(
    task_fleet: Fleet,
) -> None:
    fleet = task_fleet
    first, second = list(fleet.replicas)[:2]
    async with (
        httpx.AsyncClient(base_url=fleet.replicas[first].base_url, timeout=10) as a,
        httpx.AsyncClient(base_url=fleet.replicas[second].base_url, timeout=10) as b,
    ):
        call = rpc("tools/call", {"name": "job", "arguments": {"tag": "cancel-me", "seconds": 60}})
        task_id = assert_result(await post(a, call))["taskId"]
        asked = await until(a, task_id, {"input_required"})
        (key,) = asked["inputRequests"]
        update = rpc("tasks/update", {"taskId": task_id, "inputResponses": {key: GO}})
        assert_result(await post(a, update))  # a takes the task and runs the body
        await until(a, task_id, {"working"})
        await anyio.sleep(0.5)
        ack = assert_result(await post(b, rpc("tasks/cancel", {"taskId": task_id})))
        assert ack["resultType"] == "complete"
        task = await until(b, task_id, {"cancelled", "completed"})
        with anyio.fail_after(10):
            while True:
                effects = assert_result(
                    await post(
                        b,
                        rpc(
                            "tools/call",
                            {"name": "side_effects", "arguments": {"prefix": "cancel-"}},
                        ),
                    )
                )["structuredContent"]
                if effects["task_cancelled"]:
                    break
                await anyio.sleep(0.1)
    assert task["status"] == "cancelled"
    assert effects["task_cancelled"] == {"cancel-me": first}  # the body on a was cancelled
    assert effects["task_done"] == {}
