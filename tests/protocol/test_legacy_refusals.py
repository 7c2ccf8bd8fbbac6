"""A 2025-11-25 request the server refuses gets its JSON-RPC error, on HTTP and on stdio.

A client that did not declare ``elicitation`` calling a tool that asks is what MCP hosts do
every day: the answer is -32021 (missing client capability), and the server goes on serving.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from examples.bookshop import build as build_bookshop
from tests.conftest import KEY
from tests.http_helpers import asgi_client
from tests.protocol.test_legacy import initialize, order

ROOT = Path(__file__).resolve().parents[2]
MISSING_CLIENT_CAPABILITY = -32021
INVALID_PARAMS = -32602
pytestmark = pytest.mark.anyio
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def unknown_prompt(request_id: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "prompts/get",
        "params": {"name": "no-such-prompt"},
    }


async def test_over_http_a_question_to_a_client_without_the_capability_is_32021() -> None:
    async with asgi_client(build_bookshop(keys=[KEY]).streamable_http_app()) as http:
        opened = await http.post("/mcp", json=initialize(capabilities={}), headers=HEADERS)
        session = {**HEADERS, "MCP-Session-Id": opened.headers["mcp-session-id"]}
        refused = await http.post("/mcp", json=order(2, "Neuromancer"), headers=session)
        unknown = await http.post("/mcp", json=unknown_prompt(3), headers=session)
        served = await http.post("/mcp", json=order(4, "Dune"), headers=session)
    assert refused.status_code == 200, refused.text  # the JSON-RPC error, as 2025-11-25 expects
    error = refused.json()["error"]
    assert error["code"] == MISSING_CLIENT_CAPABILITY
    assert "elicitation" in error["message"]
    assert error["data"]["requiredCapabilities"] == {"elicitation": {"form": {}}}
    assert unknown.json()["error"]["code"] == INVALID_PARAMS
    assert isinstance(served, httpx.Response) and served.status_code == 200
    assert served.json()["result"]["content"][0]["text"] == "Ordered 'Dune'."


def test_over_stdio_the_refusal_is_an_error_response_and_the_process_serves_on() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "engine", "serve", "examples/bookshop_server.py", "--stdio"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PYTHONPATH": str(ROOT), "ENGINE_KEYS": KEY, "ENGINE_STORE": "none"},
    )
    assert process.stdin and process.stdout
    for message in (initialize(capabilities={}), order(2, "Neuromancer"), unknown_prompt(3)):
        process.stdin.write(json.dumps(message).encode() + b"\n")
        process.stdin.flush()
    replies = {}
    for _ in range(3):
        reply = json.loads(process.stdout.readline())
        replies[reply["id"]] = reply
    process.stdin.write(json.dumps(order(4, "Dune")).encode() + b"\n")
    process.stdin.flush()
    served = json.loads(process.stdout.readline())
    process.stdin.close()
    assert process.wait(timeout=10) == 0, process.stderr.read() if process.stderr else ""
    assert replies[2]["error"]["code"] == MISSING_CLIENT_CAPABILITY
    assert replies[3]["error"]["code"] == INVALID_PARAMS
    assert served["result"]["content"][0]["text"] == "Ordered 'Dune'."
