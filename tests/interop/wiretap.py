"""Seeing what real clients and our server exchanged, without taking part in it.

``HttpTap`` is ASGI middleware for the loopback ``RoundRobinProxy`` (one upstream): it passes
every request and response through unchanged and keeps a copy of each JSON-RPC message, from
JSON bodies and from the ``data:`` lines of event streams. ``stdio_messages`` reads the log that
``stdio_tap.py`` writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fleet_helpers import Receive, Scope, Send


@dataclass
class Exchange:
    method: str
    status: int = 0
    content_type: str = ""
    request: bytes = b""
    response: bytearray = field(default_factory=bytearray)

    def replies(self) -> list[dict[str, Any]]:
        """The JSON-RPC messages in the response body received so far."""
        text = self.response.decode(errors="replace")
        if self.content_type.startswith("text/event-stream"):
            chunks = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        else:
            chunks = [text] if text.strip() else []
        messages: list[dict[str, Any]] = []
        for chunk in chunks:
            try:
                message = json.loads(chunk)
            except ValueError:
                continue
            messages.extend(m for m in (message if isinstance(message, list) else [message]))
        return [m for m in messages if isinstance(m, dict)]

    def sent(self) -> dict[str, Any] | None:
        try:
            message = json.loads(self.request)
        except ValueError:
            return None
        return message if isinstance(message, dict) else None


class HttpTap:
    def __init__(self, app: Any) -> None:
        self.app = app
        self.exchanges: list[Exchange] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        exchange = Exchange(scope["method"])
        self.exchanges.append(exchange)

        async def tapped_receive() -> dict[str, Any]:
            message = await receive()
            if message["type"] == "http.request":
                exchange.request += message.get("body", b"")
            return message

        async def tapped_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                exchange.status = message["status"]
                for name, value in message.get("headers", []):
                    if name.lower() == b"content-type":
                        exchange.content_type = value.decode("latin-1")
            elif message["type"] == "http.response.body":
                exchange.response += message.get("body", b"")
            await send(message)

        await self.app(scope, tapped_receive, tapped_send)

    def replies_to(self, rpc_method: str) -> list[tuple[Exchange, dict[str, Any]]]:
        """(exchange, reply) for every response to a request of ``rpc_method``."""
        found = []
        for exchange in self.exchanges:
            sent = exchange.sent()
            if sent is None or sent.get("method") != rpc_method:
                continue
            for reply in exchange.replies():
                if reply.get("id") == sent.get("id") and ("result" in reply or "error" in reply):
                    found.append((exchange, reply))
        return found


def stdio_messages(log: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(client to server, server to client) JSON-RPC messages from a ``stdio_tap.py`` log."""
    sent: list[dict[str, Any]] = []
    received: list[dict[str, Any]] = []
    for line in log.read_text(errors="replace").splitlines():
        mark, _, body = line.partition(" ")
        try:
            message = json.loads(body)
        except ValueError:
            continue
        if isinstance(message, dict):
            (sent if mark == ">" else received).append(message)
    return sent, received


def stdio_replies_to(log: Path, rpc_method: str) -> list[dict[str, Any]]:
    sent, received = stdio_messages(log)
    ids = [m["id"] for m in sent if m.get("method") == rpc_method and "id" in m]
    return [m for m in received if m.get("id") in ids and ("result" in m or "error" in m)]
