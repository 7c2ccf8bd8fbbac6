"""Scopes follow the call: a tool with ``scopes=["admin"]`` run as a task, and the same user's
token without ``admin``. Its ``tasks/get``, ``tasks/update``, ``tasks/cancel`` and a
``subscriptions/listen`` naming the task are refused as a ``tools/call`` of the tool is: 403,
``WWW-Authenticate: Bearer error="insufficient_scope"`` naming every scope the request needs.
A requestState minted for a call that needs scopes carries them: a replica that does not declare
them (a deploy that changed the tool's ``scopes=``) still refuses the next round without them.

Real servers over sockets: the test authorization server signs the JWTs, the MCP server checks
them with ``JWTVerifier`` against its JWKS, tasks are kept in SQLite.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from pydantic import BaseModel

from engine import Context, JWTVerifier, MCPServer
from engine.auth.settings import AuthSettings
from engine.handlers.task_policy import EXTENSION
from tests.auth_server import AuthorizationServer, serve_authorization_server
from tests.conftest import KEY
from tests.fleet_helpers import serve_asgi
from tests.http_helpers import assert_error, assert_result, post, request, streaming, text_of

pytestmark = pytest.mark.anyio

RESOURCE = "https://mcp.example.com/mcp"
METADATA = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
TASKS: dict[str, Any] = {"extensions": {EXTENSION: {}}, "elicitation": {}}
YES = {"action": "accept", "content": {"confirm": True}}


class Confirm(BaseModel):
    confirm: bool


def disks(issuer: AuthorizationServer, *, admin_only: bool = True, **options: Any) -> MCPServer:
    """A server whose ``wipe`` (a task) and ``erase`` (rounds) need ``admin`` on top of the
    server's ``shop``; with ``admin_only=False``, the same tools declared without it."""
    verifier = JWTVerifier(f"{issuer.issuer}/jwks", issuer=issuer.issuer, audience=RESOURCE)
    auth = AuthSettings(
        issuer_url=issuer.issuer, resource_server_url=RESOURCE, required_scopes=["shop"]
    )
    mcp = MCPServer("disks", keys=[KEY], token_verifier=verifier, auth=auth, **options)
    scopes = ["admin"] if admin_only else []

    @mcp.tool(scopes=scopes, task=True)
    async def wipe(disk: str, ctx: Context) -> str:
        answer = await ctx.elicit(f"Wipe {disk}?", Confirm)
        return f"wiped {disk}: {answer.data.confirm}"

    @mcp.tool(scopes=scopes)
    async def erase(disk: str, ctx: Context) -> str:
        answer = await ctx.elicit(f"Erase {disk}?", Confirm)
        return f"erased {disk}: {answer.data.confirm}"

    return mcp


@dataclass
class Disks:
    issuer: AuthorizationServer
    client: httpx.AsyncClient

    def token(self, subject: str, scope: str) -> str:
        return self.issuer.mint(subject, audience=RESOURCE, scope=scope)

    async def send(self, body: dict[str, Any], token: str) -> httpx.Response:
        return await post(self.client, body, headers={"Authorization": f"Bearer {token}"})


@pytest.fixture
async def shop(tmp_path: Path) -> AsyncIterator[Disks]:
    async with serve_authorization_server() as issuer:
        mcp = disks(issuer, store=f"sqlite:///{tmp_path / 'tasks.db'}", task_poll_interval=0.01)
        async with (
            serve_asgi(mcp.streamable_http_app()) as base,
            httpx.AsyncClient(base_url=base, trust_env=False, timeout=20) as client,
        ):
            yield Disks(issuer, client)


def tasks(method: str, task_id: str, **params: Any) -> dict[str, Any]:
    return request(method, {"taskId": task_id, **params}, capabilities=TASKS)


async def waiting_task(shop: Disks, admin: str) -> tuple[str, str]:
    """A ``wipe`` task made with the admin token, waiting for its confirmation: its id and the
    key of its question."""
    body = request("tools/call", {"name": "wipe", "arguments": {"disk": "sda"}}, capabilities=TASKS)
    made = assert_result(await shop.send(body, admin))
    task_id: str = made["taskId"]
    task = await until(shop, task_id, admin, "input_required")
    (key,) = task["inputRequests"]
    return task_id, key


async def until(shop: Disks, task_id: str, token: str, status: str) -> dict[str, Any]:
    with anyio.fail_after(10):
        while True:
            task = assert_result(await shop.send(tasks("tasks/get", task_id), token))
            if task["status"] == status:
                return task
            await anyio.sleep(0.01)


def insufficient_scope(response: httpx.Response) -> None:
    """403 with the challenge and body a ``tools/call`` without ``admin`` gets."""
    assert response.status_code == 403, response.text
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="insufficient_scope", error_description="')
    assert challenge.endswith(f'scope="shop admin", resource_metadata="{METADATA}"')
    body = response.json()
    assert body["error"] == "insufficient_scope"
    assert "needs the scope admin" in body["error_description"]


async def test_tasks_get_without_the_scope_is_refused_as_the_call_is(shop: Disks) -> None:
    admin, plain = shop.token("ada", "shop admin"), shop.token("ada", "shop")
    task_id, _ = await waiting_task(shop, admin)

    got = await shop.send(tasks("tasks/get", task_id), plain)
    insufficient_scope(got)
    called = await shop.send(
        request("tools/call", {"name": "wipe", "arguments": {"disk": "sda"}}, capabilities=TASKS),
        plain,
    )
    insufficient_scope(called)
    assert got.headers["www-authenticate"] == called.headers["www-authenticate"]
    assert got.json() == called.json()

    watching = tasks("tasks/get", task_id)
    watching["params"]["_meta"]["progressToken"] = "w"
    async with streaming(shop.client, watching, headers={"Authorization": f"Bearer {plain}"}) as (
        response,
        _,
    ):
        await response.aread()
        insufficient_scope(response)


async def test_tasks_update_without_the_scope_is_refused_and_takes_no_answer(
    shop: Disks,
) -> None:
    admin, plain = shop.token("ada", "shop admin"), shop.token("ada", "shop")
    task_id, key = await waiting_task(shop, admin)
    update = tasks("tasks/update", task_id, inputResponses={key: YES})
    insufficient_scope(await shop.send(update, plain))
    task = assert_result(await shop.send(tasks("tasks/get", task_id), admin))
    assert task["status"] == "input_required"
    assert list(task["inputRequests"]) == [key]


async def test_the_result_is_not_read_without_the_scope(shop: Disks) -> None:
    admin, plain = shop.token("ada", "shop admin"), shop.token("ada", "shop")
    task_id, key = await waiting_task(shop, admin)
    assert_result(await shop.send(tasks("tasks/update", task_id, inputResponses={key: YES}), admin))
    done = await until(shop, task_id, admin, "completed")
    assert text_of(done["result"]) == "wiped sda: True"
    refused = await shop.send(tasks("tasks/get", task_id), plain)
    insufficient_scope(refused)
    assert "wiped" not in refused.text


async def test_tasks_cancel_without_the_scope_is_refused(shop: Disks) -> None:
    admin, plain = shop.token("ada", "shop admin"), shop.token("ada", "shop")
    task_id, _ = await waiting_task(shop, admin)
    insufficient_scope(await shop.send(tasks("tasks/cancel", task_id), plain))
    task = assert_result(await shop.send(tasks("tasks/get", task_id), admin))
    assert task["status"] == "input_required"
    assert_result(await shop.send(tasks("tasks/cancel", task_id), admin))
    assert (await until(shop, task_id, admin, "cancelled"))["status"] == "cancelled"


async def test_listen_naming_the_task_without_the_scope_is_refused(shop: Disks) -> None:
    admin, plain = shop.token("ada", "shop admin"), shop.token("ada", "shop")
    task_id, _ = await waiting_task(shop, admin)
    listen = request(
        "subscriptions/listen",
        {"notifications": {"taskIds": [task_id]}},
        id="sub-1",
        capabilities=TASKS,
    )
    async with streaming(shop.client, listen, headers={"Authorization": f"Bearer {plain}"}) as (
        refused,
        _,
    ):
        assert refused.headers["content-type"] != "text/event-stream"
        await refused.aread()
        insufficient_scope(refused)
    async with streaming(shop.client, listen, headers={"Authorization": f"Bearer {admin}"}) as (
        response,
        events,
    ):
        assert response.status_code == 200
        acknowledged = await events.next()
    assert acknowledged["params"]["notifications"] == {"taskIds": [task_id]}


async def test_another_users_token_learns_nothing_of_the_scopes(shop: Disks) -> None:
    """Whose the task is comes first: another user's token, with or without ``admin``, is told
    the task is not found, not which scope it needs."""
    task_id, _ = await waiting_task(shop, shop.token("ada", "shop admin"))
    for scope in ("shop admin", "shop"):
        bob = shop.token("bob", scope)
        error = assert_error(await shop.send(tasks("tasks/get", task_id), bob), 400, -32602)
        assert "Task not found" in error["message"]
        assert "admin" not in error["message"]


async def test_a_request_state_carries_the_scopes_of_its_call() -> None:
    """A call that needs ``admin``, begun on a replica that says so, goes on only with ``admin``
    wherever it goes: on a replica whose ``erase`` declares no scope (a deploy changing the
    tool's ``scopes=``), a round without ``admin`` is refused as on the first replica."""
    async with serve_authorization_server() as issuer:
        first, drifted = disks(issuer), disks(issuer, admin_only=False)
        async with (
            serve_asgi(first.streamable_http_app()) as base_first,
            serve_asgi(drifted.streamable_http_app()) as base_drifted,
            httpx.AsyncClient(base_url=base_first, trust_env=False, timeout=20) as on_first,
            httpx.AsyncClient(base_url=base_drifted, trust_env=False, timeout=20) as on_drifted,
        ):
            shop = Disks(issuer, on_first)
            admin, plain = shop.token("ada", "shop admin"), shop.token("ada", "shop")
            erase = request(
                "tools/call", {"name": "erase", "arguments": {"disk": "sda"}}, capabilities=TASKS
            )
            asked = assert_result(await shop.send(erase, admin))
            assert asked["resultType"] == "input_required"
            (key,) = asked["inputRequests"]
            retry = request(
                "tools/call",
                {
                    "name": "erase",
                    "arguments": {"disk": "sda"},
                    "requestState": asked["requestState"],
                    "inputResponses": {key: YES},
                },
                capabilities=TASKS,
            )
            insufficient_scope(await shop.send(retry, plain))
            elsewhere = Disks(issuer, on_drifted)
            insufficient_scope(await elsewhere.send(retry, plain))
            done = assert_result(await elsewhere.send(retry, admin))
            assert text_of(done) == "erased sda: True"
