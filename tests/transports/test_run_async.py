"""``run_stdio_async`` and ``run_streamable_http_async``: the official server's way to serve in
an event loop of one's own, with the same behaviour as ``mcp.run``."""

import json
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest

from examples.bookshop import build
from tests.conftest import KEY
from tests.http_helpers import call, headers_for, retry
from tests.private_redis import free_ports

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.anyio

YES = {"action": "accept", "content": {"confirm": True}}


async def test_streamable_http_async_serves_a_two_round_call_until_cancelled() -> None:
    mcp = build(keys=[KEY], store="memory://")
    port = free_ports(1)[0]
    base = f"http://127.0.0.1:{port}"
    async with (
        httpx.AsyncClient(base_url=base, timeout=10) as http,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(lambda: mcp.run_streamable_http_async(port=port, json_response=True))
        with anyio.fail_after(10):
            while True:
                try:
                    if (await http.get("/healthz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await anyio.sleep(0.05)
        first_body = call("order_book", {"title": "Neuromancer"}, capabilities={"elicitation": {}})
        first = (await http.post("/mcp", json=first_body, headers=headers_for(first_body))).json()
        assert first["result"]["resultType"] == "input_required"
        answer_body = retry(first["result"]["requestState"], {"confirm_backorder": YES})
        answer = await http.post("/mcp", json=answer_body, headers=headers_for(answer_body))
        assert answer.json()["result"]["content"][0]["text"].startswith("Backordered")
        await http.aclose()  # no idle connection for the drain to wait on
        tg.cancel_scope.cancel()
    async with httpx.AsyncClient(base_url=base, timeout=10) as http:
        with pytest.raises(httpx.TransportError):  # cancelled: nothing listens any more
            await http.get("/healthz")


async def test_sse_async_says_what_to_use_instead() -> None:
    with pytest.raises(ValueError, match="streamable-http"):
        await build(keys=[KEY]).run_sse_async()


def test_stdio_async_serves_in_the_callers_loop() -> None:
    script = (
        "import anyio\n"
        "from examples.bookshop import build\n"
        f"anyio.run(build(keys=[{KEY!r}], store=None).run_stdio_async)\n"
    )
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    lines = [
        json.dumps(m)
        for m in (initialize, {"jsonrpc": "2.0", "method": "notifications/initialized"}, listing)
    ]
    done = subprocess.run(
        [sys.executable, "-c", script],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=30,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert answers[0]["result"]["protocolVersion"] == "2025-11-25"
    assert "order_book" in {tool["name"] for tool in answers[1]["result"]["tools"]}
