"""The conftest of a run of the official tests (copied to the root of the rewritten tree).

The official ``Client`` takes an official server in process; given one of ours it would treat it
as a transport. Here it gets a real one: JSON-RPC messages over memory streams, served by this
project's stdio session loop (both protocol eras, as on stdin/stdout).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from mcp.client import client as official_client
from mcp.shared.message import SessionMessage

from engine import MCPServer
from engine.transports.messages import serve_messages

# The official suite opts into distributed tracing the same way, before logfire is imported.
os.environ.setdefault("LOGFIRE_DISTRIBUTED_TRACING", "true")

RESULTS = os.environ.get("OFFICIAL_RESULTS")
EXCLUDED = os.environ.get("OFFICIAL_EXCLUDED")


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


class EngineTransport:
    """An official client transport onto one of our servers, in process."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self._cm: Any = None

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[tuple[Any, Any]]:
        to_server, server_reads = anyio.create_memory_object_stream[SessionMessage](64)
        server_writes, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](
            64
        )
        requests, request_source = anyio.create_memory_object_stream[bytes](64)

        async def pump_in() -> None:
            async with server_reads, requests:
                async for message in server_reads:
                    await requests.send(
                        message.message.model_dump_json(by_alias=True, exclude_unset=True).encode()
                    )

        async def reply(data: bytes) -> None:
            message = mcp_types.jsonrpc_message_adapter.validate_json(data, by_name=False)
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await server_writes.send(SessionMessage(message))

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump_in)
            tg.start_soon(serve_messages, self.server, request_source, reply)
            try:
                async with from_server, to_server:
                    yield from_server, to_server
            finally:
                tg.cancel_scope.cancel()
        await server_writes.aclose()

    async def __aenter__(self) -> tuple[Any, Any]:
        self._cm = self._connect()
        return await self._cm.__aenter__()

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._cm.__aexit__(*exc)


_original_post_init = official_client.Client.__post_init__


def _post_init(self: Any) -> None:
    server = self.server
    if isinstance(server, MCPServer):
        self.server = EngineTransport(server)
        try:
            _original_post_init(self)
        finally:
            self.server = server
        return
    _original_post_init(self)


official_client.Client.__post_init__ = _post_init  # type: ignore[method-assign]


def _excluded() -> list[str]:
    return list(json.loads(EXCLUDED)) if EXCLUDED else []


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A whole excluded file is not even imported (its module-level code may need internals)."""
    relative = collection_path.relative_to(config.rootpath).as_posix()
    return True if relative in _excluded() else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    patterns = _excluded()
    kept, dropped = [], []
    for item in items:
        (dropped if any(_matches(item.nodeid, p) for p in patterns) else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _matches(nodeid: str, pattern: str) -> bool:
    if pattern.endswith("*"):
        return nodeid.startswith(pattern[:-1])
    return nodeid == pattern or nodeid.startswith((pattern + "[", pattern + "::"))


_outcomes: dict[str, tuple[str, str]] = {}


def _reason(report: pytest.BaseReport) -> str:
    """The last line of a failure: the exception and its message."""
    text = str(report.longrepr or "").strip().splitlines()
    return text[-1][:300] if text else ""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" or report.outcome != "passed":
        previous = _outcomes.get(item.nodeid)
        if previous is None or previous[0] == "passed":
            _outcomes[item.nodeid] = (report.outcome, _reason(report))


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.outcome == "failed":
        _outcomes[report.nodeid] = ("error", _reason(report))


def pytest_sessionfinish(session: pytest.Session) -> None:
    if RESULTS:
        Path(RESULTS).write_text(json.dumps(_outcomes, indent=1), encoding="utf-8")
