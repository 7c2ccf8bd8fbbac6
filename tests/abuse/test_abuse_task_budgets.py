"""One principal cannot take the tasks, the store or the CPU other principals need: the tasks it
may keep and make per minute, the tasks of a replica, the size of a task's result, and how many
answers or task ids one request may carry are bounded, each by a setting its refusal names.
Against a real replica over HTTP, with real SQLite and Redis stores; the ``principal`` callback
tells users apart by a header here (with auth, the token's subject)."""

from __future__ import annotations

import contextlib
import statistics
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from engine import MCPServer
from engine.errors import INVALID_PARAMS, OVER_BUDGET
from engine.handlers.task_policy import EXTENSION
from engine.scope import RequestScope
from tests.conftest import KEY
from tests.http_helpers import assert_error, assert_result, post, request, serving

pytestmark = pytest.mark.anyio

TASKS: dict[str, Any] = {"extensions": {EXTENSION: {}}, "elicitation": {}}


def user_of(scope: RequestScope) -> str | None:
    """Who makes the request: the user its ``X-User`` header names (a stand-in for auth)."""
    return None if scope.headers is None else scope.headers.get("x-user")


def jobs(store: str, **options: Any) -> MCPServer:
    mcp = MCPServer(
        "jobs", keys=[KEY], store=store, principal=user_of, task_poll_interval=0.01, **options
    )

    @mcp.tool(task=True)
    async def nap(seconds: float) -> str:
        await anyio.sleep(seconds)
        return f"slept {seconds:g} s"

    @mcp.tool(task=True)
    def report(chars: int) -> str:
        return "x" * chars

    @mcp.tool()
    def echo(text: str) -> str:
        return text

    return mcp


@pytest.fixture(params=["sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'tasks.db'}"
    url: str = request.getfixturevalue("redis_url")
    return url


def serve(mcp: MCPServer) -> contextlib.AbstractContextManager[str]:
    return serving(mcp.streamable_http_app())


async def make(client: httpx.AsyncClient, user: str, name: str, **arguments: Any) -> httpx.Response:
    body = request("tools/call", {"name": name, "arguments": arguments}, capabilities=TASKS)
    return await post(client, body, headers={"X-User": user})


async def until_done(client: httpx.AsyncClient, user: str, task_id: str) -> httpx.Response:
    body = request("tasks/get", {"taskId": task_id}, capabilities=TASKS)
    with anyio.fail_after(10):
        while True:
            response = await post(client, body, headers={"X-User": user})
            if assert_result(response)["status"] not in ("working", "input_required"):
                return response
            await anyio.sleep(0.02)


async def echo_p99(client: httpx.AsyncClient, user: str) -> float:
    """The 99th percentile of 100 plain tool calls of ``user``, in seconds."""
    took = []
    for _ in range(100):
        started = time.perf_counter()
        body = request("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
        assert_result(await post(client, body, headers={"X-User": user}))
        took.append(time.perf_counter() - started)
    return statistics.quantiles(took, n=100)[98]


def refusals(mcp: MCPServer, budget: str) -> int:
    return mcp.core.metrics.value("engine_budget_refusals_total", budget=budget)


async def test_a_principal_at_its_task_budget_leaves_another_principals_tasks_served(
    store: str,
) -> None:
    mcp = jobs(store, max_tasks_per_principal=20)
    with serve(mcp) as url:
        async with httpx.AsyncClient(base_url=url, timeout=20) as client:
            idle = await echo_p99(client, "alice")
            made = [await make(client, "mallory", "nap", seconds=0) for _ in range(20)]
            beyond = [await make(client, "mallory", "nap", seconds=0) for _ in range(30)]
            busy = await echo_p99(client, "alice")
            alices = assert_result(await make(client, "alice", "nap", seconds=0))
            done = assert_result(await until_done(client, "alice", alices["taskId"]))
    assert all(assert_result(response)["resultType"] == "task" for response in made)
    error = assert_error(beyond[0], 429, OVER_BUDGET)
    assert "You have 20 tasks kept on this replica" in error["message"]
    assert "(limit 20, set by max_tasks_per_principal)" in error["message"]
    assert error["data"]["setting"] == "max_tasks_per_principal"
    assert all(response.status_code == 429 for response in beyond)
    assert done["status"] == "completed"
    assert refusals(mcp, "max_tasks_per_principal") == 30
    print(f"\nalice's call p99: idle {idle * 1000:.1f} ms, mallory at her budget {busy * 1000:.1f}")
    assert busy < max(2 * idle, 1.0)  # generous: the measurement is in docs/security.md


async def test_a_principal_making_tasks_too_fast_is_slowed_and_others_are_not(
    store: str,
) -> None:
    mcp = jobs(store, max_task_creations_per_minute=10)
    with serve(mcp) as url:
        async with httpx.AsyncClient(base_url=url, timeout=20) as client:
            made = [await make(client, "mallory", "nap", seconds=0) for _ in range(10)]
            eleventh = await make(client, "mallory", "nap", seconds=0)
            alices = await make(client, "alice", "nap", seconds=0)
    assert all(response.status_code == 200 for response in made)
    error = assert_error(eleventh, 429, OVER_BUDGET)
    assert "(limit 10, set by max_task_creations_per_minute)" in error["message"]
    assert assert_result(alices)["resultType"] == "task"
    assert refusals(mcp, "max_task_creations_per_minute") == 1


async def test_the_tasks_of_a_replica_are_bounded_across_principals(store: str) -> None:
    mcp = jobs(store, max_tasks_per_principal=10, max_tasks_per_replica=15)
    with serve(mcp) as url:
        async with httpx.AsyncClient(base_url=url, timeout=20) as client:
            for user, count in (("mallory", 10), ("trudy", 5)):
                for _ in range(count):
                    assert (await make(client, user, "nap", seconds=0)).status_code == 200
            sixteenth = await make(client, "alice", "nap", seconds=0)
    error = assert_error(sixteenth, 429, OVER_BUDGET)
    assert "This replica keeps as many tasks as it may" in error["message"]
    assert "(limit 15, set by max_tasks_per_replica)" in error["message"]
    assert refusals(mcp, "max_tasks_per_replica") == 1


async def test_a_task_result_over_its_cap_fails_the_task_and_is_not_kept(store: str) -> None:
    mcp = jobs(store, max_task_result_bytes=4096)
    with serve(mcp) as url:
        async with httpx.AsyncClient(base_url=url, timeout=20) as client:
            large = assert_result(await make(client, "alice", "report", chars=1_000_000))
            small = assert_result(await make(client, "alice", "report", chars=100))
            failed = await until_done(client, "alice", large["taskId"])
            completed = assert_result(await until_done(client, "alice", small["taskId"]))
    task = assert_result(failed)
    assert task["status"] == "failed"
    assert "(limit 4096, set by max_task_result_bytes)" in task["statusMessage"]
    assert "more than a task keeps" in task["statusMessage"]
    assert len(failed.content) < 4096  # the million characters were not kept
    assert completed["status"] == "completed"
    assert refusals(mcp, "max_task_result_bytes") == 1


async def test_too_many_input_responses_are_refused_before_any_is_read(store: str) -> None:
    mcp = jobs(store)
    answers = {f"q{n}": {"action": "accept", "content": {}} for n in range(65)}
    with serve(mcp) as url:
        async with httpx.AsyncClient(base_url=url, timeout=20) as client:
            call = request(
                "tools/call",
                {"name": "echo", "arguments": {"text": "hi"}, "inputResponses": answers},
            )
            in_a_call = await post(client, call, headers={"X-User": "mallory"})
            task = assert_result(await make(client, "mallory", "nap", seconds=5))
            update = request(
                "tasks/update",
                {"taskId": task["taskId"], "inputResponses": answers},
                capabilities=TASKS,
            )
            in_an_update = await post(client, update, headers={"X-User": "mallory"})
            sixty_four = dict(list(answers.items())[:64])
            call["params"]["inputResponses"] = sixty_four
            at_the_limit = await post(client, call, headers={"X-User": "mallory"})
    for response in (in_a_call, in_an_update):
        error = assert_error(response, 400, INVALID_PARAMS)
        assert "inputResponses has 65 answers" in error["message"]
        assert "(limit 64, set by max_input_responses)" in error["message"]
    assert assert_result(at_the_limit)["content"][0]["text"] == "hi"
    assert refusals(mcp, "max_input_responses") == 2


async def test_a_listen_naming_too_many_tasks_is_refused_before_any_is_looked_up(
    store: str,
) -> None:
    mcp = jobs(store, max_listen_task_ids=100)
    unknown = [f"{n:032x}" for n in range(101)]
    listen = request(
        "subscriptions/listen",
        {"notifications": {"taskIds": unknown}},
        id="sub",
        capabilities=TASKS,
    )
    with serve(mcp) as url:
        async with httpx.AsyncClient(base_url=url, timeout=20) as client:
            refused = await post(client, listen, headers={"X-User": "mallory"})
    error = assert_error(refused, 400, INVALID_PARAMS, id="sub")
    assert "'taskIds' names 101 tasks" in error["message"]
    assert "(limit 100, set by max_listen_task_ids)" in error["message"]
    assert refusals(mcp, "max_listen_task_ids") == 1
