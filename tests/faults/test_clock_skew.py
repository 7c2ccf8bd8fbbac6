"""One replica's wall clock 30 s, then 90 s, ahead (libfaketime): it takes over none of the tasks
the others run, the others and it take each other's requestStates, and its ``/healthz`` and
``/metrics`` say how far off it is."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import httpx
import pytest

from deploy.fleet import Fleet, http_get
from tests.faults.tasks import GO, Jobs, clock_ahead, rpc
from tests.http_helpers import post

pytestmark = pytest.mark.anyio

SKEWED = "fleet-3"
CALLS = 60
TASKS = 20


async def two_rounds(client: httpx.AsyncClient, tag: str) -> str:
    """A ``slow`` call of two rounds through nginx: what its second round came to."""
    call: dict[str, Any] = {"name": "slow", "arguments": {"tag": tag, "seconds": 0}}
    asked = (await post(client, rpc("tools/call", call))).json()
    if "error" in asked:
        return f"round 1: {asked['error']['message']}"
    (key,) = asked["result"]["inputRequests"]
    call["inputResponses"] = {key: GO}
    call["requestState"] = asked["result"]["requestState"]
    answered = (await post(client, rpc("tools/call", call))).json()
    if "error" in answered:
        return f"round 2: {answered['error']['message']}"
    return str(answered["result"]["resultType"])


@pytest.mark.timeout(180)
@pytest.mark.parametrize("ahead", [30, 90])
async def test_a_replica_whose_clock_is_ahead_takes_over_nothing_and_refuses_no_token(
    tmp_path: Any, ahead: int
) -> None:
    with Fleet(
        redis="private",
        workdir=tmp_path / "fleet",
        replica_envs={SKEWED: clock_ahead(ahead)},
    ) as fleet:
        healthy, skewed = fleet.replicas["fleet-1"], fleet.replicas[SKEWED]
        jobs = Jobs(fleet)
        async with (
            httpx.AsyncClient(base_url=healthy.base_url, timeout=10) as on_healthy,
            httpx.AsyncClient(base_url=fleet.base_url, timeout=10) as through_nginx,
        ):
            for n in range(TASKS):  # bodies of 6 s on fleet-1: three sweeps of fleet-3 pass
                await jobs.start(on_healthy, f"skew-{n:02d}", 6)
            outcomes: Counter[str] = Counter()
            for n in range(CALLS):  # round robin: each call's rounds on two replicas
                outcomes[await two_rounds(through_nginx, f"call-{n:02d}")] += 1
            await jobs.wait_ended(through_nginx, 60)
            status, body, _ = http_get(skewed.port, "/healthz")
            taken_by_skewed = fleet.metrics(SKEWED).get("engine_task_takeovers_total", 0)
            skew_metric = fleet.metrics(SKEWED).get("engine_store_clock_skew_seconds")
        effects = jobs.effects()

    assert outcomes == {"complete": CALLS}, outcomes  # no -32602 either way
    tags = list(jobs.ids)
    assert {tag: task["status"] for tag, task in jobs.ended.items()} == dict.fromkeys(
        tags, "completed"
    )
    assert {jobs.finished_on(tag) for tag in tags} == {"fleet-1"}  # none taken over
    assert taken_by_skewed == 0
    assert effects["task-once"] == dict.fromkeys(tags, 1)
    assert effects["task-done"] == dict.fromkeys(tags, 1)
    assert status == 200  # leases are on the store's clock: a skew is shown, not fatal
    shown = json.loads(body)["clock_skew"]
    assert abs(shown["seconds"] - ahead) < 2 and shown["tolerance"] == 2.5
    assert skew_metric is not None and abs(skew_metric - ahead) < 2
    print(
        f"\nfleet-3 {ahead} s ahead: {CALLS} two-round calls across replicas all complete, "
        f"{TASKS} tasks on fleet-1 all finished there; /healthz clock_skew {shown}"
    )
