"""The ASGI helpers both HTTP eras use (``engine/transports/_asgi.py``): request headers, and
the hang-up watcher of requests in flight."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("_no_errors_logged")]


def test_request_headers_join_repeated_names_and_lowercase_them() -> None:
    from engine.transports._asgi import request_headers

    raw = [(b"Accept", b"application/json"), (b"x-trace", b"a"), (b"X-Trace", b"b")]
    assert request_headers({"headers": raw}) == {
        "accept": "application/json",
        "x-trace": "a, b",
    }
    assert request_headers({"headers": iter(raw[:2])}) == {
        "accept": "application/json",
        "x-trace": "a",
    }
    assert request_headers({}) == {}
    as_lists = [[b"Accept", b"application/json"], [b"x-trace", b"a"]]
    assert request_headers({"headers": as_lists}) == {
        "accept": "application/json",
        "x-trace": "a",
    }


def test_request_headers_are_a_fresh_dict_for_every_request() -> None:
    from engine.transports._asgi import request_headers

    raw = [(b"host", b"127.0.0.1"), (b"mcp-method", b"tools/call")]
    first = request_headers({"headers": list(raw)})
    first["mcp-method"] = "changed by a handler"
    first["x-added"] = "1"
    assert request_headers({"headers": list(raw)}) == {
        "host": "127.0.0.1",
        "mcp-method": "tools/call",
    }


async def test_requests_in_flight_get_a_hang_up_watcher_only_once_they_run_long() -> None:
    from engine.transports._asgi import until_disconnect

    hung_up = anyio.Event()
    listened = 0

    async def receive() -> dict[str, Any]:
        nonlocal listened
        listened += 1
        await hung_up.wait()
        return {"type": "http.disconnect"}

    async def quick() -> str:
        return "done"

    async def long_running() -> str:
        await anyio.sleep(10)
        return "never"

    # Quick requests end before any watcher starts: receive() is never called for them.
    assert [await until_disconnect(quick(), receive, 0.02) for _ in range(100)] == ["done"] * 100
    await anyio.sleep(0.05)
    assert listened == 0

    outcome: list[str | None] = []

    async def run_long() -> None:
        outcome.append(await until_disconnect(long_running(), receive, 0.02))

    with anyio.fail_after(2):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_long)
            await anyio.sleep(0.05)  # past the watch delay: a watcher now listens
            hung_up.set()
    assert outcome == [None]
    assert listened == 1


async def test_a_hang_up_before_the_watcher_starts_is_seen_when_it_does() -> None:
    from engine.transports._asgi import until_disconnect

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}  # the client is already gone

    async def long_running() -> str:
        await anyio.sleep(10)
        return "never"

    with anyio.fail_after(2):
        assert await until_disconnect(long_running(), receive, 0.02) is None
