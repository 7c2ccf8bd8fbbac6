"""``ctx.log`` and ``ctx.debug/info/warning/error``, as the official ``Context`` has them: a
``notifications/message`` to the client of this request, only at the levels it asked for."""

from __future__ import annotations

import json
import logging
import logging.config
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client as OfficialClient
from mcp.client.streamable_http import streamable_http_client

from engine import Context, MCPServer
from engine.testing import Client
from tests.conftest import KEY
from tests.fleet_helpers import serve_asgi
from tests.http_helpers import asgi_client, call, post

pytestmark = pytest.mark.anyio

LOG_LEVEL = "io.modelcontextprotocol/logLevel"
TIMEOUT = 20.0


def chatty() -> MCPServer:
    mcp = MCPServer("Chatty", keys=[KEY])

    @mcp.tool()
    async def work(ctx: Context) -> str:
        await ctx.debug("looking closely")
        await ctx.info("started")
        await ctx.warning({"disk": 0.93}, logger_name="disk")
        await ctx.error([1, "two", None])
        await ctx.log("notice", 42, logger_name="count")
        await ctx.log("emergency", True)
        return "done"

    @mcp.tool()
    async def bad_level(ctx: Context) -> str:
        await ctx.log("verbose", "?")
        return "unreachable"

    return mcp


async def call_with_meta(client: Client, name: str, **meta: Any) -> dict[str, Any]:
    return await client.send("tools/call", {"name": name, "_meta": {**client.meta(), **meta}})


def messages(client: Client) -> list[dict[str, Any]]:
    return [n["params"] for n in client.notifications if n["method"] == "notifications/message"]


async def test_a_modern_request_hears_what_it_asked_for_and_above() -> None:
    async with Client(chatty()) as client:
        result = await call_with_meta(client, "work", **{LOG_LEVEL: "warning"})
    assert result["content"][0]["text"] == "done"
    assert messages(client) == [
        {"level": "warning", "logger": "disk", "data": {"disk": 0.93}},
        {"level": "error", "data": [1, "two", None]},
        {"level": "emergency", "data": True},
    ]


async def test_debug_asked_for_hears_everything() -> None:
    async with Client(chatty()) as client:
        await call_with_meta(client, "work", **{LOG_LEVEL: "debug"})
    assert [m["level"] for m in messages(client)] == [
        "debug",
        "info",
        "warning",
        "error",
        "notice",
        "emergency",
    ]
    assert {"level": "notice", "logger": "count", "data": 42} in messages(client)


async def test_a_request_that_did_not_ask_hears_nothing_and_nothing_fails() -> None:
    async with Client(chatty()) as client:
        result = await client.call_tool("work")
        unknown = await call_with_meta(client, "work", **{LOG_LEVEL: "chatty"})
    assert result.text == "done"
    assert unknown["content"][0]["text"] == "done"
    assert messages(client) == []


async def test_a_request_without_a_stream_sends_nothing_and_succeeds() -> None:
    async with asgi_client(chatty().streamable_http_app()) as http:
        response = await post(http, call("work"))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert json.loads(response.text)["result"]["content"][0]["text"] == "done"


async def test_over_http_the_messages_come_on_the_request_stream() -> None:
    body = call("work")
    body["params"]["_meta"][LOG_LEVEL] = "error"
    async with asgi_client(chatty().streamable_http_app()) as http:
        response = await post(http, body)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [
        json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")
    ]
    assert [e.get("method") for e in events] == ["notifications/message"] * 2 + [None]
    assert events[0]["params"] == {"level": "error", "data": [1, "two", None]}
    assert events[-1]["result"]["content"][0]["text"] == "done"


async def test_an_unknown_level_is_the_handlers_error(caplog: pytest.LogCaptureFixture) -> None:
    async with Client(chatty()) as client:
        result = await call_with_meta(client, "bad_level", **{LOG_LEVEL: "debug"})
    assert result["isError"] is True
    assert "Unknown log level 'verbose'" in caplog.text


Heard = list[tuple[str, str | None, Any]]


async def heard_in_a_legacy_session(mcp: MCPServer, tool: str, level: str) -> tuple[Heard, Heard]:
    """What a 2025-11-25 client (the official one) hears from a call of ``tool``: with no level
    set, then after ``logging/setLevel`` ``level``."""
    heard: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        heard.append(params)

    async with (
        serve_asgi(mcp.streamable_http_app()) as base,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        client = OfficialClient(
            streamable_http_client(base.rstrip("/") + "/mcp", http_client=http),
            mode="legacy",
            read_timeout_seconds=TIMEOUT,
            logging_callback=on_log,
        )
        async with client:
            await client.call_tool(tool, {})
            by_default = [(p.level, p.logger, p.data) for p in heard]
            heard.clear()
            await client.set_logging_level(level)
            await client.call_tool(tool, {})
            after_set = [(p.level, p.logger, p.data) for p in heard]
    return by_default, after_set


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_a_legacy_session_hears_its_set_level_info_by_default() -> None:
    by_default, after_set = await heard_in_a_legacy_session(chatty(), "work", "error")
    assert by_default == [
        ("info", None, "started"),
        ("warning", "disk", {"disk": 0.93}),
        ("error", None, [1, "two", None]),
        ("notice", "count", 42),
        ("emergency", None, True),
    ]
    assert after_set == [("error", None, [1, "two", None]), ("emergency", None, True)]


def logs_through_python_logging() -> MCPServer:
    mcp = MCPServer("Logging", keys=[KEY])

    @mcp.tool()
    async def work() -> str:
        logging.getLogger("app.work").warning("disk at %d%%", 93)
        logging.getLogger("app.work").debug("details")
        return "done"

    return mcp


def logs_both_ways() -> MCPServer:
    mcp = MCPServer("Both", keys=[KEY])

    @mcp.tool()
    async def fetch(ctx: Context) -> str:
        await ctx.info("fetching")
        logging.getLogger("app.http").warning("GET https://internal.example/?key=s3cret")
        return "fetched"

    return mcp


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_a_legacy_session_hears_python_logging_only_once_it_sets_a_level() -> None:
    by_default, after_set = await heard_in_a_legacy_session(logs_both_ways(), "fetch", "warning")
    assert by_default == [("info", None, "fetching")]  # the handler's own words only
    assert after_set == [("warning", "app.http", "GET https://internal.example/?key=s3cret")]


async def test_python_logging_reaches_a_modern_request_that_asked_for_its_level() -> None:
    async with Client(logs_through_python_logging()) as client:
        await call_with_meta(client, "work", **{LOG_LEVEL: "warning"})
        asked = messages(client)
        client.notifications.clear()
        await call_with_meta(client, "work")
    assert asked == [{"level": "warning", "logger": "app.work", "data": "disk at 93%"}]
    assert messages(client) == []  # not asked for: nothing sent


async def test_python_logging_reaches_the_client_after_the_program_configures_logging_again() -> (
    None
):
    async with Client(logs_through_python_logging()) as client:
        await call_with_meta(client, "work", **{LOG_LEVEL: "warning"})
        root = logging.getLogger()
        kept = root.handlers[:]
        logging.config.dictConfig(
            {"version": 1, "disable_existing_loggers": False, "root": {"handlers": []}}
        )
        try:
            client.notifications.clear()
            await call_with_meta(client, "work", **{LOG_LEVEL: "warning"})
        finally:
            root.handlers[:] = kept
    assert messages(client) == [{"level": "warning", "logger": "app.work", "data": "disk at 93%"}]


def reports_and_logs() -> MCPServer:
    mcp = MCPServer("Steps", keys=[KEY])

    @mcp.tool()
    async def steps(ctx: Context) -> str:
        for n in (1, 2):
            await ctx.info(f"step {n}")
            logging.getLogger("app.steps").warning("after step %d", n)
            await ctx.report_progress(n, 2)
        return "done"

    return mcp


async def test_log_lines_and_progress_reach_the_client_in_the_order_the_tool_sent_them() -> None:
    async with Client(reports_and_logs()) as client:
        await call_with_meta(client, "steps", **{LOG_LEVEL: "info", "progressToken": "p"})
    heard = [n["params"].get("data", n["params"].get("progress")) for n in client.notifications]
    assert heard == ["step 1", "after step 1", 1, "step 2", "after step 2", 2]
