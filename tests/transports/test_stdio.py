"""stdio: newline-delimited JSON-RPC on stdin/stdout, the same rounds as over HTTP."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
}


def exchange(target: str, messages: list[dict[str, Any]], expect: int) -> list[dict[str, Any]]:
    """Send messages to a stdio server and read ``expect`` lines back."""
    process = subprocess.Popen(
        [sys.executable, "-m", "engine", "serve", target, "--stdio"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={
            "PYTHONPATH": str(ROOT),
            "ENGINE_KEYS": "k" * 64,
            "ENGINE_STORE": "none",
            "PATH": "/usr/bin:/bin",
        },
    )
    assert process.stdin and process.stdout
    for message in messages:
        process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()
    lines = [json.loads(process.stdout.readline()) for _ in range(expect)]
    process.stdin.close()
    assert process.wait(timeout=10) == 0
    return lines


def call(request_id: int, name: str, **params: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "_meta": META, **params},
    }


def test_a_tool_call_over_stdio_sees_its_request_id() -> None:
    [reply] = exchange(
        "examples/seeds/search_books.py",
        [call(7, "search_books", arguments={"query": "dune"})],
        expect=1,
    )
    assert reply["id"] == 7
    assert reply["result"]["content"][0]["text"] == "[request 7] Found 3 books matching 'dune'."


def test_a_multi_round_call_over_stdio() -> None:
    [first] = exchange(
        "examples/bookshop_server.py",
        [call(1, "order_book", arguments={"title": "Neuromancer"})],
        expect=1,
    )
    state = first["result"]["requestState"]
    answer = {"confirm_backorder": {"action": "accept", "content": {"confirm": True}}}
    [second] = exchange(
        "examples/bookshop_server.py",
        [
            call(
                2,
                "order_book",
                arguments={"title": "Neuromancer"},
                inputResponses=answer,
                requestState=state,
            )
        ],
        expect=1,
    )
    assert second["result"]["content"][0]["text"] == (
        "Backordered 'Neuromancer'; it ships in 2-3 weeks."
    )


def test_progress_is_interleaved_before_the_response() -> None:
    meta = {**META, "progressToken": "p1"}
    lines = exchange(
        "examples/conformance_server.py",
        [
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "test_tool_with_progress", "_meta": meta},
            }
        ],
        expect=4,
    )
    assert [line.get("method") for line in lines[:3]] == ["notifications/progress"] * 3
    assert [line["params"]["progress"] for line in lines[:3]] == [0, 50, 100]
    assert lines[3]["id"] == 3


def test_bad_lines_get_errors_and_the_server_keeps_going() -> None:
    process_lines = exchange(
        "examples/seeds/search_books.py",
        [{"jsonrpc": "2.0", "id": 1, "method": "nope", "params": {"_meta": META}}],
        expect=1,
    )
    assert process_lines[0]["error"]["code"] == -32601
