"""A task record is bound to its task id: copied in the store under another task's id (over an
existing task, or as a new one), it does not open, and that task reads as not found, while the
task it was copied from reads as before. Against a real server over a socket, on a real SQLite
store and on a real Redis."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from engine import MCPServer
from engine.handlers.task_policy import EXTENSION
from engine.state.claims import new_call_id
from stores import Store, TaskRow, open_store
from tests.conftest import KEY
from tests.fleet_helpers import serve_asgi
from tests.http_helpers import assert_error, assert_result, post, request

pytestmark = pytest.mark.anyio

TASKS: dict[str, Any] = {"extensions": {EXTENSION: {}}}


def vault(store: str) -> MCPServer:
    mcp = MCPServer("vault", keys=[KEY], store=store, task_poll_interval=0.01)

    @mcp.tool(task=True)
    def note(text: str) -> str:
        return f"kept: {text}"

    return mcp


@contextlib.asynccontextmanager
async def opened(url: str) -> AsyncIterator[Store]:
    """The server's store, as anyone who can write to it sees it."""
    store = open_store(url)
    try:
        yield store
    finally:
        await store.aclose()


async def completed(client: httpx.AsyncClient, text: str) -> str:
    body = request("tools/call", {"name": "note", "arguments": {"text": text}}, capabilities=TASKS)
    made = assert_result(await post(client, body))
    assert made["resultType"] == "task"
    task_id: str = made["taskId"]
    with anyio.fail_after(10):
        while True:
            if (await get(client, task_id))["status"] == "completed":
                return task_id
            await anyio.sleep(0.01)


async def get(client: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    body = request("tasks/get", {"taskId": task_id}, capabilities=TASKS)
    return assert_result(await post(client, body))


async def not_found(client: httpx.AsyncClient, task_id: str) -> None:
    body = request("tasks/get", {"taskId": task_id}, capabilities=TASKS)
    error = assert_error(await post(client, body), 400, -32602)
    assert "Task not found" in error["message"]


def text(task: dict[str, Any]) -> str:
    content: str = task["result"]["content"][0]["text"]
    return content


async def test_a_record_copied_under_another_task_id_does_not_open_on_sqlite(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await copied_record_does_not_open(f"sqlite:///{tmp_path / 'tasks.db'}", caplog)


async def test_a_record_copied_under_another_task_id_does_not_open_on_redis(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    await copied_record_does_not_open(redis_url, caplog)


async def copied_record_does_not_open(store_url: str, caplog: pytest.LogCaptureFixture) -> None:
    async with (
        serve_asgi(vault(store_url).streamable_http_app()) as base,
        httpx.AsyncClient(base_url=base, trust_env=False, timeout=20) as client,
        opened(store_url) as store,
    ):
        secret = await completed(client, "the safe's code is 1234")
        decoy = await completed(client, "nothing here")
        copied = await store.get_task(secret)
        over = await store.get_task(decoy)
        assert copied is not None and over is not None
        # The decoy's row, its record replaced by the secret one's.
        swapped = TaskRow(
            decoy,
            over.version + 1,
            copied.status,
            copied.target,
            over.created,
            over.updated,
            copied.record,
            over.fence,
        )
        assert await store.put_task(swapped, ttl=60, due_in=None)
        # And a task of its own, made of the secret one's record.
        planted = new_call_id().hex()
        row = TaskRow(
            planted, 1, copied.status, copied.target, copied.created, copied.updated,
            copied.record, copied.fence,
        )  # fmt: skip
        assert await store.put_task(row, ttl=60, due_in=None)

        await not_found(client, decoy)
        await not_found(client, planted)
        assert text(await get(client, secret)) == "kept: the safe's code is 1234"

    refused = [r.getMessage() for r in caplog.records if "does not open as this task" in r.message]
    assert any(decoy in message for message in refused), refused
    assert any(planted in message for message in refused), refused
