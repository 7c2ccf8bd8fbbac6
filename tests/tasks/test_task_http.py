"""Tasks over Streamable HTTP on a real socket: the ``Mcp-Name`` of ``tasks/*``, a
``tasks/get`` that streams status notifications, and ``subscriptions/listen`` for tasks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from pydantic import BaseModel

from engine import Context, MCPServer
from engine.handlers.task_policy import EXTENSION
from tests.conftest import KEY
from tests.http_helpers import (
    SUBSCRIPTION_ID,
    assert_error,
    assert_result,
    post,
    request,
    serving,
    streaming,
)

pytestmark = pytest.mark.anyio

TASKS: dict[str, Any] = {"extensions": {EXTENSION: {}}, "elicitation": {}}


class Confirm(BaseModel):
    confirm: bool


def jobs() -> MCPServer:
    mcp = MCPServer("jobs", keys=[KEY], store="memory://", task_poll_interval=0.01)

    @mcp.tool(task=True)
    async def nap(seconds: float) -> str:
        await anyio.sleep(seconds)
        return f"slept {seconds:g} s"

    @mcp.tool(task=True)
    async def confirm(ctx: Context) -> str:
        answer = await ctx.elicit("Go on?", Confirm)
        return f"confirmed: {answer.data.confirm}"

    return mcp


@pytest.fixture
def url() -> Iterator[str]:
    with serving(jobs().streamable_http_app()) as served:
        yield served


async def make(client: httpx.AsyncClient, name: str, arguments: dict[str, Any]) -> str:
    body = request("tools/call", {"name": name, "arguments": arguments}, capabilities=TASKS)
    made = assert_result(await post(client, body))
    assert made["resultType"] == "task"
    task_id: str = made["taskId"]
    return task_id


def get(task_id: str, **options: Any) -> dict[str, Any]:
    return request("tasks/get", {"taskId": task_id}, capabilities=TASKS, **options)


async def until(client: httpx.AsyncClient, task_id: str, status: str) -> dict[str, Any]:
    with anyio.fail_after(5):
        while True:
            task = assert_result(await post(client, get(task_id)))
            if task["status"] == status:
                return task
            await anyio.sleep(0.01)


async def test_tasks_requests_carry_the_task_id_as_mcp_name(url: str) -> None:
    async with httpx.AsyncClient(base_url=url) as client:
        task_id = await make(client, "nap", {"seconds": 0.01})
        for method, params in (
            ("tasks/get", {"taskId": task_id}),
            ("tasks/update", {"taskId": task_id, "inputResponses": {}}),
            ("tasks/cancel", {"taskId": task_id}),
        ):
            body = request(method, params, capabilities=TASKS)
            error = assert_error(
                await post(client, body, headers={"Mcp-Name": "another"}), 400, -32020
            )
            assert "Mcp-Name" in error["message"]
            assert_error(await post(client, body, headers={"Mcp-Name": None}), 400, -32020)
            assert_result(await post(client, body, headers={"Mcp-Name": task_id}))


async def test_a_tasks_get_that_asks_for_notifications_streams_each_change(url: str) -> None:
    async with httpx.AsyncClient(base_url=url) as client:
        task_id = await make(client, "nap", {"seconds": 0.3})
        watching = get(task_id, id="watch", meta={"progressToken": "t"})
        async with streaming(client, watching) as (response, events):
            assert response.headers["content-type"] == "text/event-stream"
            changed = await events.next()
            final = await events.next()
            assert await events.rest() == []
    assert changed["method"] == "notifications/tasks/status"
    assert changed["params"]["taskId"] == task_id
    assert changed["params"]["status"] == "completed"
    assert final["id"] == "watch"
    assert final["result"]["status"] == "completed"
    assert final["result"]["result"]["content"][0]["text"] == "slept 0.3 s"


async def test_listen_hears_the_status_of_the_tasks_it_names(url: str) -> None:
    listen = request(
        "subscriptions/listen",
        {"notifications": {"taskIds": []}},
        id="sub-1",
        capabilities=TASKS,
    )
    async with httpx.AsyncClient(base_url=url) as client:
        task_id = await make(client, "confirm", {})
        asked = await until(client, task_id, "input_required")
        listen["params"]["notifications"]["taskIds"] = [task_id, "not-a-task"]
        async with streaming(client, listen) as (_, events):
            ack = await events.next()
            assert ack["params"]["notifications"] == {"taskIds": [task_id]}
            (key,) = asked["inputRequests"]
            answer = {"action": "accept", "content": {"confirm": True}}
            update = request(
                "tasks/update",
                {"taskId": task_id, "inputResponses": {key: answer}},
                capabilities=TASKS,
            )
            assert_result(await post(client, update))
            statuses = []
            with anyio.fail_after(5):
                while "completed" not in statuses:
                    note = await events.next()
                    assert note["method"] == "notifications/tasks/status"
                    assert note["params"]["_meta"][SUBSCRIPTION_ID] == "sub-1"
                    statuses.append(note["params"]["status"])
    assert note["params"]["result"]["content"][0]["text"] == "confirmed: True"


async def test_listening_to_tasks_needs_the_extension(url: str) -> None:
    listen = request("subscriptions/listen", {"notifications": {"taskIds": ["t"]}}, capabilities={})
    async with httpx.AsyncClient(base_url=url) as client:
        error = assert_error(await post(client, listen), 400, -32021)
    assert error["data"] == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
