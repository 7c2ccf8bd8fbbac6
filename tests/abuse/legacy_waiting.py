"""Legacy clients that leave calls waiting for answers they never send, against a real replica:
sessions opened over HTTP, each call's stream held open on a raw socket once its question came."""

from __future__ import annotations

import json
import socket
from typing import Any

import httpx

from tests.abuse.replica import Replica

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def initialize(replica: Replica, **headers: str) -> dict[str, str]:
    """A new 2025-11-25 session (with elicitation); the headers its requests carry."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    response = httpx.post(
        f"{replica.base}/mcp", json=body, headers={**HEADERS, **headers}, timeout=10
    )
    assert response.status_code == 200, response.text
    answer = response.json()
    if "error" in answer:
        return {"error": json.dumps(answer["error"])}
    return {
        **HEADERS,
        **headers,
        "MCP-Session-Id": response.headers["mcp-session-id"],
        "MCP-Protocol-Version": "2025-11-25",
    }


def order(request_id: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "order_book", "arguments": {"title": "Neuromancer"}},
    }


def leave_waiting(
    replica: Replica, session: dict[str, str], request_id: int
) -> tuple[socket.socket | None, dict[str, Any]]:
    """Call a tool that asks a question, and keep its stream open once the question came: the
    socket, and the question; or no socket and the JSON-RPC answer of a call refused."""
    sock = replica.connect()
    data = json.dumps(order(request_id)).encode()
    head = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{replica.port}\r\n"
    head += f"Content-Length: {len(data)}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in session.items()) + "\r\n"
    sock.sendall(head.encode() + data)
    received = b""
    while True:
        chunk = sock.recv(65536)
        assert chunk, f"the replica closed the call: {received[:300]!r}"
        received += chunk
        _, _, body = received.partition(b"\r\n\r\n")
        if b"text/event-stream" in received and b"\ndata: " in received.replace(b"\r", b""):
            for line in body.replace(b"\r", b"").split(b"\n"):
                if line.startswith(b"data: ") and line[6:].strip():
                    return sock, json.loads(line[6:])
        elif b"application/json" in received and body.rstrip().endswith(b"}"):
            sock.close()
            start = body.index(b"{")
            return None, json.loads(body[start:])
