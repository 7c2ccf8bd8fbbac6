"""stdio: newline-delimited JSON-RPC on stdin/stdout, the same rounds as over HTTP."""

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
}


def stdio_server(target: str) -> subprocess.Popen[bytes]:
    """``serve TARGET --stdio`` without a store, its pipes ours."""
    return subprocess.Popen(
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


def exchange(target: str, messages: list[dict[str, Any]], expect: int) -> list[dict[str, Any]]:
    """Send messages to a stdio server and read ``expect`` lines back."""
    process = stdio_server(target)
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


def test_a_cancel_naming_an_id_no_request_can_have_is_ignored() -> None:
    cancels = [
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": bad}}
        for bad in ({"a": 1}, [1], 1.5, True, None)
    ]
    search = call(9, "search_books", arguments={"query": "dune"})
    [reply] = exchange("examples/seeds/search_books.py", [*cancels, search], expect=1)
    assert reply["result"]["content"][0]["text"] == "[request 9] Found 3 books matching 'dune'."


def test_a_call_sent_right_after_initialize_is_served_in_its_session(tmp_path: Path) -> None:
    """A 2025-11-25 client may send its first call without waiting for ``initialize``'s answer.

    With the embedded SQLite store, opening the session takes a write; here another process
    holds the write lock for a moment, so the calls arrive while the session is being stored.
    They must still be served in the session they follow, not as 2026-07-28 requests without
    their version.
    """
    database = tmp_path / "engine.db"
    env = {
        "PYTHONPATH": str(ROOT),
        "ENGINE_KEYS": "k" * 64,
        "ENGINE_STORE": f"sqlite:///{database}",
        "PATH": "/usr/bin:/bin",
    }
    command = [sys.executable, "-m", "engine", "serve", "examples/seeds/search_books.py", "--stdio"]
    subprocess.run(command, cwd=ROOT, env=env, input=b"", check=True, timeout=30)
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "eager", "version": "1"},
        },
    }
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    ping = {"jsonrpc": "2.0", "id": 0, "method": "ping", "params": {"_meta": META}}
    calls = [
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": "search_books", "arguments": {"query": "dune"}},
        }
        for request_id in range(2, 10)
    ]
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert process.stdin and process.stdout
    process.stdin.write(json.dumps(ping).encode() + b"\n")
    process.stdin.flush()
    assert json.loads(process.stdout.readline())["id"] == 0  # started: its schema is in place
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    for message in (initialize, initialized, *calls):
        process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()
    time.sleep(1)
    holder.execute("COMMIT")
    holder.close()
    replies = [json.loads(process.stdout.readline()) for _ in range(1 + len(calls))]
    process.stdin.close()
    assert process.wait(timeout=10) == 0
    assert replies[0]["id"] == 1
    assert replies[0]["result"]["protocolVersion"] == "2025-11-25"
    answers = sorted(replies[1:], key=lambda reply: reply["id"])
    assert [reply["id"] for reply in answers] == list(range(2, 10))
    for answer in answers:
        assert answer["result"]["content"][0]["text"].endswith("Found 3 books matching 'dune'.")


def test_a_request_reusing_the_id_of_one_still_running_is_refused() -> None:
    process = stdio_server("examples/bookshop_server.py")
    assert process.stdin and process.stdout

    def send(message: dict[str, Any]) -> None:
        assert process.stdin
        process.stdin.write(json.dumps(message).encode() + b"\n")
        process.stdin.flush()

    def read() -> dict[str, Any]:
        assert process.stdout
        line: dict[str, Any] = json.loads(process.stdout.readline())
        return line

    initialize = {
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "reuser", "version": "1"},
    }
    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize})
    assert read()["id"] == 1
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    order = {"name": "order_book", "arguments": {"title": "Neuromancer"}}
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": order})
    question = read()
    assert question["method"] == "elicitation/create"
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": order})
    refused = read()
    yes = {"action": "accept", "content": {"confirm": True}}
    send({"jsonrpc": "2.0", "id": question["id"], "result": yes})
    answered = read()
    process.stdin.close()
    assert process.wait(timeout=10) == 0
    assert refused["id"] == 2
    assert refused["error"]["code"] == -32600
    assert refused["error"]["message"] == (
        "Invalid Request: id 2 is that of a request of yours still running; give each request"
        " its own id"
    )
    assert answered["id"] == 2
    assert answered["result"]["content"][0]["text"].startswith("Backordered 'Neuromancer'")
