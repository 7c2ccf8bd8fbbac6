"""Interop with real, pinned MCP clients: the MCP Inspector CLI, the TypeScript v2 client (and
its Tasks extension client, through an nginx fleet) and the Python SDK's 1.x and 2.x lines,
against ``python -m engine serve`` on loopback.

Client versions and the install cache are in ``clients.py``. Nothing here speaks our wire for the
client: the taps in ``wiretap.py`` only copy what passes, so that a test can also check what a
client received when its own output leaves it out.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from deploy.fleet import Fleet
from tests.conftest import KEY
from tests.fleet_helpers import ROOT, EngineProcess, RoundRobinProxy, engine_fleet, serve_asgi
from tests.interop import clients
from tests.interop.wiretap import HttpTap, stdio_replies_to

pytestmark = [pytest.mark.anyio, pytest.mark.interop, pytest.mark.timeout(900)]
"""The generous timeout covers a first run's downloads; every client step has its own."""

STEP_TIMEOUT = 30.0
"""Wall-clock limit of one client process (or one SDK call)."""

HERE = Path(__file__).resolve().parent
BOOKSHOP = "examples/bookshop_server.py"
EMPTY_SHELF = str(HERE / "empty_list_server.py")

MISSING_ELICITATION = (
    "Client did not declare the form elicitation capability required by resolver "
    "'confirm_backorder'"
)
BACKORDERED = "Backordered 'Neuromancer'; it ships in 2-3 weeks."
ORDER_BOOK_INPUT = {
    "type": "object",
    "properties": {"title": {"title": "Title", "type": "string"}},
    "required": ["title"],
    "title": "order_bookArguments",
}


# --- fixtures -------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def node_clients() -> clients.NodeClients:
    return clients.install_node_clients()


@pytest.fixture(scope="session")
def mcp1_python() -> Path:
    return clients.install_mcp1()


@pytest.fixture(scope="module")
def bookshop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineProcess]:
    logs = tmp_path_factory.mktemp("interop-bookshop")
    with engine_fleet(BOOKSHOP, {"bookshop": KEY}, logs) as started:
        yield started["bookshop"]


@pytest.fixture(scope="module")
def empty_shelf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineProcess]:
    logs = tmp_path_factory.mktemp("interop-empty")
    with engine_fleet(EMPTY_SHELF, {"empty": KEY}, logs) as started:
        yield started["empty"]


@contextlib.asynccontextmanager
async def tapped(server: EngineProcess) -> AsyncIterator[tuple[HttpTap, str]]:
    """A recording pass-through hop in front of ``server``; yields it and the URL to use."""
    tap = HttpTap(RoundRobinProxy([server.base_url]))
    async with serve_asgi(tap) as base_url:
        yield tap, f"{base_url}/mcp"


def client_env(home: Path) -> dict[str, str]:
    """A small, explicit environment: no proxies, a private HOME for the Inspector's files."""
    home.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "MCP_CATALOG_PATH": str(home / "catalog.json"),
        "MCP_CLIENT_CONFIG_PATH": str(home / "client.json"),
        "MCP_STORAGE_DIR": str(home / "storage"),
        "NO_COLOR": "1",
    }


async def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    try:
        with anyio.fail_after(STEP_TIMEOUT):
            return await anyio.run_process(argv, env=env, check=False, cwd=ROOT)
    except TimeoutError:
        pytest.fail(f"client step timed out after {STEP_TIMEOUT}s: {argv}")


def stdout_json(done: subprocess.CompletedProcess[bytes]) -> Any:
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return json.loads(done.stdout)


def error_envelope(done: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    """The Inspector CLI's ``{"error": {...}}`` line on stderr (``--format json``)."""
    lines = [line for line in done.stderr.decode(errors="replace").splitlines() if line.strip()]
    envelope: dict[str, Any] = json.loads(lines[-1])["error"]
    return envelope


# --- 1. the MCP Inspector CLI: no elicitation capability, so -32021 -------------------------------


def inspector_args(era: str, *method: str) -> list[str]:
    return ["--protocol-era", era, "--format", "json", "--method", *method]


LIST = ("tools/list",)
ORDER = ("tools/call", "--tool-name", "order_book", "--tool-arg", "title=Neuromancer")


def assert_listed_bookshop(listing: Any) -> None:
    [tool] = listing["result"]["tools"]
    assert tool["name"] == "order_book"
    assert tool["description"] == "Order a book from the shop."
    assert tool["inputSchema"] == ORDER_BOOK_INPUT


def assert_missing_capability(reply: dict[str, Any]) -> None:
    error = reply["error"]
    assert error["code"] == -32021
    assert error["message"] == MISSING_ELICITATION
    assert error["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_inspector_over_http(
    era: str, node_clients: clients.NodeClients, bookshop: EngineProcess, tmp_path: Path
) -> None:
    env = client_env(tmp_path / "home")
    async with tapped(bookshop) as (tap, url):
        target = [*node_clients.inspector, url, "--transport", "http"]
        listing = await run([*target, *inspector_args(era, *LIST)], env)
        ordered = await run([*target, *inspector_args(era, *ORDER)], env)
    assert_listed_bookshop(stdout_json(listing))

    assert ordered.returncode == 1, ordered
    envelope = error_envelope(ordered)
    assert MISSING_ELICITATION in envelope["message"]
    [(exchange, reply)] = tap.replies_to("tools/call")
    assert_missing_capability(reply)
    sent = exchange.sent() or {}
    if era == "legacy":
        # A 2025-11-25 session: the error comes as a JSON-RPC error with HTTP 200, as that
        # era's clients expect it (any other status reads as a failed POST).
        versions = [r["result"]["protocolVersion"] for _, r in tap.replies_to("initialize")]
        assert versions == ["2025-11-25", "2025-11-25"]  # one session per Inspector run
        assert exchange.status == 200
        assert "status" not in envelope  # not reported as a failed HTTP request
    else:
        meta = sent["params"]["_meta"]
        assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
        assert "elicitation" not in meta["io.modelcontextprotocol/clientCapabilities"]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_inspector_over_stdio(
    era: str, node_clients: clients.NodeClients, tmp_path: Path
) -> None:
    env = client_env(tmp_path / "home")
    log = tmp_path / "stdio.log"
    server = [
        sys.executable, str(HERE / "stdio_tap.py"), str(log), "--",
        sys.executable, "-m", "engine", "serve", "--stdio", BOOKSHOP,
    ]  # fmt: skip
    target = [
        *node_clients.inspector,
        "--transport", "stdio", "--cwd", str(ROOT),
        "-e", f"ENGINE_KEYS={KEY}", "-e", "ENGINE_STORE=none", "-e", f"PYTHONPATH={ROOT}",
    ]  # fmt: skip
    listing = await run([*target, *inspector_args(era, *LIST), "--", *server], env)
    ordered = await run([*target, *inspector_args(era, *ORDER), "--", *server], env)
    assert_listed_bookshop(stdout_json(listing))

    assert ordered.returncode == 1, ordered
    assert MISSING_ELICITATION in error_envelope(ordered)["message"]
    [reply] = stdio_replies_to(log, "tools/call")
    assert_missing_capability(reply)
    if era == "legacy":
        versions = [r["result"]["protocolVersion"] for r in stdio_replies_to(log, "initialize")]
        assert versions == ["2025-11-25", "2025-11-25"]  # one session per Inspector run
    else:
        assert not stdio_replies_to(log, "initialize")
        assert stdio_replies_to(log, "server/discover")


# --- 2. the TypeScript v2 client: a two-round elicitation on 2026-07-28 ---------------------------


async def test_typescript_client_answers_the_elicitation(
    node_clients: clients.NodeClients, bookshop: EngineProcess, tmp_path: Path
) -> None:
    script = node_clients.script("ts_elicit.mjs")
    async with tapped(bookshop) as (tap, url):
        done = await run([str(node_clients.node), str(script), url], client_env(tmp_path / "h"))
    output = stdout_json(done)
    assert output == {
        "protocolVersion": "2026-07-28",
        "asked": ["'Neuromancer' is out of stock (2-3 weeks). Order anyway?"],
        "isError": False,
        "text": BACKORDERED,
        "structuredContent": {"result": BACKORDERED},
    }
    calls = tap.replies_to("tools/call")
    assert len(calls) == 2
    (first, question), (retry, answer) = calls
    assert question["result"]["resultType"] == "input_required"
    assert "requestState" not in (first.sent() or {})["params"]
    retried = (retry.sent() or {})["params"]
    assert retried["requestState"] == question["result"]["requestState"]
    assert list(retried["inputResponses"].values()) == [
        {"action": "accept", "content": {"confirm": True}}
    ]
    assert answer["result"]["content"] == [{"type": "text", "text": BACKORDERED}]


# --- 2b. the TypeScript Tasks client: a task with a question, through the nginx fleet -------------


@pytest.fixture(scope="module")
def task_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """nginx in front of three replicas of the fleet example, on a Redis of its own."""
    with Fleet(redis="private", workdir=tmp_path_factory.mktemp("interop-tasks")) as started:
        yield started


async def test_typescript_tasks_client_runs_a_task_with_a_question_through_the_fleet(
    node_clients: clients.NodeClients, task_fleet: Fleet, tmp_path: Path
) -> None:
    script = node_clients.script("ts_task.mjs")
    argv = [str(node_clients.node), str(script), task_fleet.url, "ts-task-1"]
    output = stdout_json(await run(argv, client_env(tmp_path / "h")))
    assert output["protocolVersion"] == "2026-07-28"
    assert output["kind"] == "task"
    assert output["outcome"] == "completed"
    assert output["statuses"][-1] == "completed"
    assert "input_required" in output["statuses"]
    [question] = output["asked"]
    assert question["scope"] == "task"  # answered with tasks/update, not a retried call
    assert question["message"].startswith("Go on with the job ts-task-1 (hold ")
    assert output["text"].startswith("ts-task-1 done (hold ")
    assert output["methods"][0] == "tools/call"
    assert "tasks/update" in output["methods"]
    assert len(set(output["replicas"])) >= 2  # nginx spread the task's requests over replicas


# --- 3. an empty list is structured content too ---------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_mcp2_gets_an_empty_list_as_structured_content(
    mode: str, empty_shelf: EngineProcess
) -> None:
    with anyio.fail_after(STEP_TIMEOUT):
        async with (
            httpx2.AsyncClient(timeout=httpx2.Timeout(10.0), trust_env=False) as http,
            Client(streamable_http_client(empty_shelf.url, http_client=http), mode=mode) as client,
        ):
            [tool] = (await client.list_tools()).tools
            result = await client.call_tool("no_books", {})
    assert tool.output_schema is not None
    assert tool.output_schema["properties"]["result"]["type"] == "array"
    assert not result.is_error
    assert result.structured_content == {"result": []}
    assert not [b for b in result.content if not isinstance(b, types.TextContent)]


async def test_mcp1_gets_an_empty_list_as_structured_content(
    mcp1_python: Path, empty_shelf: EngineProcess, tmp_path: Path
) -> None:
    done = await run(
        [str(mcp1_python), str(HERE / "mcp1_call.py"), empty_shelf.url, "no_books"],
        client_env(tmp_path / "home"),
    )
    output = stdout_json(done)
    assert output["sdk"] == clients.MCP1_VERSION
    assert output["protocolVersion"] == "2025-11-25"
    assert output["isError"] is False
    assert output["structuredContent"] == {"result": []}


# --- 4. a client without the elicitation capability: -32021, and the server serves on ----------


def stdio_bookshop() -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "engine", "serve", "--stdio", "--store", "none", BOOKSHOP],
        cwd=str(ROOT),
        env={**os.environ, "ENGINE_KEYS": KEY},
    )


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_mcp2_without_elicitation_gets_32021_and_the_server_serves_on(
    mode: str, transport: str, bookshop: EngineProcess
) -> None:
    with anyio.fail_after(STEP_TIMEOUT):
        async with contextlib.AsyncExitStack() as stack:
            if transport == "http":
                http = await stack.enter_async_context(
                    httpx2.AsyncClient(timeout=httpx2.Timeout(10.0), trust_env=False)
                )
                target: Any = streamable_http_client(bookshop.url, http_client=http)
            else:
                target = stdio_bookshop()
            client = await stack.enter_async_context(Client(target, mode=mode))
            with pytest.raises(MCPError) as refused:
                await client.call_tool("order_book", {"title": "Neuromancer"})
            served = await client.call_tool("order_book", {"title": "Dune"})
    assert refused.value.error.code == -32021
    assert refused.value.error.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}
    assert served.content == [types.TextContent(type="text", text="Ordered 'Dune'.")]


async def test_mcp1_without_elicitation_gets_32021_and_the_server_serves_on(
    mcp1_python: Path, bookshop: EngineProcess, tmp_path: Path
) -> None:
    done = await run(
        [str(mcp1_python), str(HERE / "mcp1_refused.py"), bookshop.url],
        client_env(tmp_path / "home"),
    )
    output = stdout_json(done)
    assert output["sdk"] == clients.MCP1_VERSION
    assert output["refused"] == {
        "code": -32021,
        "data": {"requiredCapabilities": {"elicitation": {"form": {}}}},
    }
    assert output["served"][0]["text"] == "Ordered 'Dune'."
