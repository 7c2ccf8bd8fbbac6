"""Streamable HTTP (2026-07-28) under a real uvicorn server: event streams and hang-ups.

Only a socket shows events arriving one by one (progress, ``subscriptions/listen``) and a
client hanging up, which must cancel its call."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from engine import Context, MCPServer
from engine.transports import http as http_transport
from examples import conformance_server
from tests.conftest import KEY
from tests.http_helpers import (
    SUBSCRIPTION_ID,
    assert_error,
    assert_result,
    call,
    post,
    request,
    serving,
    streaming,
    text_of,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("_no_errors_logged")]

conformance = conformance_server.mcp


# --- a real server: streams and hang-ups ----------------------------------------------------------


@pytest.fixture
def conformance_url() -> Iterator[str]:
    with serving(conformance.streamable_http_app()) as url:
        yield url


async def test_progress_streams_before_the_result(conformance_url: str) -> None:
    body = call("test_tool_with_progress", id="call-1", meta={"progressToken": "tok"})
    async with (
        httpx.AsyncClient(base_url=conformance_url) as client,
        streaming(client, body) as (response, events),
    ):
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        assert response.headers["x-accel-buffering"] == "no"
        assert response.headers["x-engine-replica"] == conformance.settings.replica_id
        progress = [await events.next() for _ in range(3)]
        final = await events.next()
        assert await events.rest() == []
    assert [m["method"] for m in progress] == ["notifications/progress"] * 3
    assert [m["params"]["progress"] for m in progress] == [0, 50, 100]
    assert {m["params"]["progressToken"] for m in progress} == {"tok"}
    assert final["id"] == "call-1"
    assert text_of(final["result"]) == "Progress complete"
    assert final["result"]["resultType"] == "complete"


def listen(request_id: str, **wanted: Any) -> dict[str, Any]:
    return request("subscriptions/listen", {"notifications": wanted}, id=request_id)


async def test_listen_acknowledges_then_forwards_tools_list_changed(conformance_url: str) -> None:
    async with (
        httpx.AsyncClient(base_url=conformance_url) as client,
        streaming(client, listen("sub-1", toolsListChanged=True)) as (response, events),
    ):
        assert response.headers["content-type"] == "text/event-stream"
        ack = await events.next()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["_meta"] == {SUBSCRIPTION_ID: "sub-1"}
        assert ack["params"]["notifications"] == {"toolsListChanged": True}

        assert_result(await post(client, call("test_trigger_tool_change")))
        changed = await events.next()
    assert changed["method"] == "notifications/tools/list_changed"
    assert changed["params"]["_meta"] == {SUBSCRIPTION_ID: "sub-1"}
    assert "id" not in changed


async def test_a_listen_stream_gets_only_the_kinds_it_asked_for(conformance_url: str) -> None:
    async with (
        httpx.AsyncClient(base_url=conformance_url) as client,
        streaming(client, listen("tools", toolsListChanged=True)) as (_, tools),
        streaming(client, listen("prompts", promptsListChanged=True)) as (_, prompts),
    ):
        assert (await tools.next())["params"]["notifications"] == {"toolsListChanged": True}
        assert (await prompts.next())["params"]["notifications"] == {"promptsListChanged": True}
        assert_result(await post(client, call("test_trigger_tool_change")))
        assert (await tools.next())["method"] == "notifications/tools/list_changed"
        # The tools change was broadcast to both streams at once; the prompts stream's next
        # message is the prompts change that follows it, so it never saw the tools change.
        assert_result(await post(client, call("test_trigger_prompt_change")))
        following = await prompts.next()
    assert following["method"] == "notifications/prompts/list_changed"
    assert following["params"]["_meta"] == {SUBSCRIPTION_ID: "prompts"}


async def test_a_quiet_listen_stream_sends_keep_alive_comments(
    conformance_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_transport, "KEEPALIVE_SECONDS", 0.05)
    async with (
        httpx.AsyncClient(base_url=conformance_url) as client,
        streaming(client, listen("quiet", resourcesListChanged=True)) as (_, events),
    ):
        assert (await events.next())["method"] == "notifications/subscriptions/acknowledged"
        assert await events.next_line() == ": keep-alive"


async def test_a_listen_request_with_a_bad_header_is_refused_before_streaming(
    conformance_url: str,
) -> None:
    async with httpx.AsyncClient(base_url=conformance_url) as client:
        refused = await post(
            client, listen("s", toolsListChanged=True), headers={"Mcp-Method": "x"}
        )
        assert_error(refused, 400, -32020, id="s")
        no_filter = request("subscriptions/listen", id="s")
        assert_error(await post(client, no_filter), 400, -32602, id="s")


@pytest.mark.parametrize(
    ("wanted", "says"),
    [
        ({"toolsListChanged": "yes"}, "'toolsListChanged' must be true or false"),
        ({"promptsListChanged": 1}, "'promptsListChanged' must be true or false"),
        ({"resourcesListChanged": None}, "'resourcesListChanged' must be true or false"),
        ({"resourceSubscriptions": 5}, "'resourceSubscriptions' must be a list"),
        ({"resourceSubscriptions": ["a://b", 7]}, "'resourceSubscriptions' must be a list"),
    ],
)
async def test_a_listen_filter_of_the_wrong_type_is_refused_saying_which(
    conformance_url: str, wanted: dict[str, Any], says: str
) -> None:
    async with httpx.AsyncClient(base_url=conformance_url) as client:
        refused = await post(client, listen("s", **wanted))
    assert_error(refused, 400, -32602, id="s")
    assert says in refused.json()["error"]["message"]


async def test_a_listen_filter_naming_what_the_server_does_not_know_is_acknowledged_without_it(
    conformance_url: str,
) -> None:
    async with (
        httpx.AsyncClient(base_url=conformance_url) as client,
        streaming(client, listen("s", toolsListChanged=True, bogus=1)) as (_, events),
    ):
        acknowledged = await events.next()
    assert acknowledged["params"]["notifications"] == {"toolsListChanged": True}


class Slow:
    """A server whose one tool sleeps for 5 s and records how it ended."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.ended = threading.Event()
        self.cancelled: bool | None = None
        self.ended_at = 0.0
        self.mcp = MCPServer("slow", keys=[KEY])
        self.mcp.add_tool(self.slow)

    async def slow(self, ctx: Context) -> str:
        """Reports that it started, then sleeps."""
        await ctx.report_progress(0, 1, "started")
        self.started.set()
        finished = False
        try:
            await anyio.sleep(5)
            finished = True
        finally:
            self.cancelled = not finished
            self.ended_at = time.monotonic()
            self.ended.set()
        return "slept"

    async def wait_started(self) -> None:
        assert await anyio.to_thread.run_sync(self.started.wait, 5), "the tool never started"

    async def wait_ended(self, hung_up_at: float) -> None:
        assert await anyio.to_thread.run_sync(self.ended.wait, 2), "the tool was not cancelled"
        assert self.cancelled is True
        assert self.ended_at - hung_up_at < 1.0


async def test_closing_an_event_stream_cancels_the_call() -> None:
    slow = Slow()
    with serving(slow.mcp.streamable_http_app()) as url:
        async with httpx.AsyncClient(base_url=url) as client:
            body = call("slow", meta={"progressToken": 1})
            async with streaming(client, body) as (response, _):
                assert response.headers["content-type"] == "text/event-stream"
                await slow.wait_started()
                hung_up_at = time.monotonic()
            await slow.wait_ended(hung_up_at)


async def test_hanging_up_on_a_json_call_cancels_it() -> None:
    slow = Slow()
    with serving(slow.mcp.streamable_http_app()) as url:
        async with httpx.AsyncClient(base_url=url) as client, anyio.create_task_group() as tg:
            tg.start_soon(post, client, call("slow"))
            await slow.wait_started()
            hung_up_at = time.monotonic()
            tg.cancel_scope.cancel()
        await slow.wait_ended(hung_up_at)
