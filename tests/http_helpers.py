"""Speaking 2026-07-28 Streamable HTTP to an engine app: request builders, checks, a real server.

``request()`` (``call()`` for ``tools/call``) builds a body whose ``params._meta`` carries the
version and capabilities; ``post()`` sends it with the headers the body requires
(``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``), any of which a test can override or
drop. ``first_round()`` and ``retry()`` are the two rounds of the bookshop's ``order_book``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import anyio
import httpx
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from engine.transports._writes import coalescing

PROTOCOL = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
NAME_PARAM = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
JSON = "application/json"
ACCEPT = "application/json, text/event-stream"
LOCAL = "http://127.0.0.1"
WAIT = 5.0  # seconds any single read from a live stream may take

# The HTTP status every JSON-RPC error code must travel with (reference §1.2 and §5.1.5).
STATUS_OF = {
    -32700: 400,
    -32600: 400,
    -32602: 400,
    -32601: 404,
    -32020: 400,
    -32021: 400,
    -32022: 400,
}


def request(
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    id: Any = 1,
    capabilities: Mapping[str, Any] | None = None,
    meta: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A well-formed modern request (a notification when ``id`` is ``None``)."""
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if id is not None:
        body["id"] = id
    body["params"] = {
        **(params or {}),
        "_meta": {
            META_VERSION: PROTOCOL,
            META_CAPABILITIES: dict(capabilities or {}),
            **(meta or {}),
        },
    }
    return body


def call(name: str, arguments: dict[str, Any] | None = None, **options: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return request("tools/call", params, **options)


def sentinel(value: str) -> str:
    """``value`` in the ``=?base64?...?=`` header form."""
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


def headers_for(body: Any) -> dict[str, str]:
    """The headers a 2026-07-28 client sends with ``body``."""
    headers = {"Content-Type": JSON, "Accept": ACCEPT, "MCP-Protocol-Version": PROTOCOL}
    if not isinstance(body, dict):
        return headers
    method = body.get("method")
    if not isinstance(method, str):
        return headers
    if method.isascii() and method.isprintable():
        headers["Mcp-Method"] = method
    params = body.get("params")
    name = params.get(NAME_PARAM.get(method, "")) if isinstance(params, dict) else None
    if isinstance(name, str):
        plain = name.isascii() and name.isprintable() and name == name.strip()
        headers["Mcp-Name"] = name if plain else sentinel(name)
    return headers


def merged(base: Mapping[str, str], overrides: Mapping[str, str | None] | None) -> httpx.Headers:
    """``base`` with ``overrides`` applied; an override of ``None`` drops the header."""
    headers = httpx.Headers(dict(base))
    for name, value in (overrides or {}).items():
        if value is None:
            headers.pop(name, None)
        else:
            headers[name] = value
    return headers


async def post(
    client: httpx.AsyncClient,
    body: Any,
    *,
    headers: Mapping[str, str | None] | None = None,
    path: str = "/mcp",
) -> httpx.Response:
    """POST ``body`` (JSON-encoded unless already bytes) with the headers it requires."""
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return await client.post(path, content=content, headers=merged(headers_for(body), headers))


def asgi_client(app: Any, base_url: str = LOCAL, *, crash: bool = True) -> httpx.AsyncClient:
    """A client for ``app`` in-process. An exception escaping the app fails the test with its
    traceback; with ``crash=False`` the client sees it as a plain 500, as it would over HTTP."""
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=crash)
    return httpx.AsyncClient(transport=transport, base_url=base_url)


def assert_error(response: httpx.Response, status: int, code: int, id: Any = 1) -> dict[str, Any]:
    """The response is a JSON-RPC error with ``code``, sent with HTTP ``status``; its error."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == JSON
    message = response.json()
    assert message["jsonrpc"] == "2.0"
    assert message["id"] == id
    error: dict[str, Any] = message["error"]
    assert error["code"] == code, message
    assert isinstance(error["message"], str)
    return error


def assert_result(response: httpx.Response, id: Any = 1) -> dict[str, Any]:
    """The response is a 200 JSON-RPC result for ``id``; the result."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == JSON
    message = response.json()
    assert message["jsonrpc"] == "2.0"
    assert message["id"] == id
    assert "error" not in message, message
    result: dict[str, Any] = message["result"]
    return result


def assert_json_rpc(response: httpx.Response) -> None:
    """Whatever the input was, the answer is a well-formed JSON-RPC reply with a fitting status."""
    assert response.status_code in {200, 202, 400, 404, 413, 415}, response.text
    if response.status_code == 202:
        assert response.content == b""
        return
    assert response.headers["content-type"] == JSON
    message = response.json()
    assert message["jsonrpc"] == "2.0"
    assert "id" in message
    assert ("result" in message) != ("error" in message), message
    if response.status_code == 200:
        assert "result" in message, message
        return
    error = message["error"]
    assert isinstance(error["code"], int)
    assert isinstance(error["message"], str)
    if response.status_code in (413, 415):
        assert error["code"] == -32600
    else:
        assert STATUS_OF.get(error["code"]) == response.status_code, message


def text_of(result: Mapping[str, Any]) -> str:
    return "".join(block["text"] for block in result["content"] if block["type"] == "text")


# --- the bookshop's order_book over HTTP (examples/bookshop.py) --------------------------------

REPLICA = "replica-7"
"""The replica name the HTTP tests give the bookshop."""
YES = {"action": "accept", "content": {"confirm": True}}


async def first_round(shop: httpx.AsyncClient, title: str = "Neuromancer") -> dict[str, Any]:
    body = call("order_book", {"title": title}, capabilities={"elicitation": {}})
    result = assert_result(await post(shop, body))
    assert result["resultType"] == "input_required"
    assert set(result["inputRequests"]) == {"confirm_backorder"}
    return result


def retry(state: Any, answers: Any = None, title: str = "Neuromancer") -> dict[str, Any]:
    params = {
        "name": "order_book",
        "arguments": {"title": title},
        "inputResponses": {"confirm_backorder": YES} if answers is None else answers,
        "requestState": state,
    }
    return request("tools/call", params, capabilities={"elicitation": {}})


def flip(token: str, at: int) -> str:
    return token[:at] + ("A" if token[at] != "A" else "B") + token[at + 1 :]


# --- a real server ----------------------------------------------------------------------------


@contextlib.contextmanager
def serving(app: Any, *, loop: str = "auto") -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free local port (in a thread, on ``loop``), writing
    through the coalescing transport as ``mcp.run`` does; yield its base URL."""
    # Named as TCP, so asyncio turns Nagle off on its connections as it does for its own
    # listeners; a socket of protocol 0 leaves it on, and every split response waits 40 ms.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        log_config=None,  # uvicorn's records propagate, so caplog sees them
        timeout_graceful_shutdown=2,
        http=coalescing(HttpToolsProtocol),
        loop=loop,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 5
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


class Events:
    """The JSON-RPC messages of a ``text/event-stream`` response, one ``data:`` line each."""

    def __init__(self, response: httpx.Response) -> None:
        self._lines = response.aiter_lines()

    async def next(self) -> dict[str, Any]:
        with anyio.fail_after(WAIT):
            async for line in self._lines:
                if line.startswith("data:"):
                    message: dict[str, Any] = json.loads(line[len("data:") :])
                    return message
        raise AssertionError("the event stream ended")

    async def next_line(self) -> str:
        """The next non-blank line as sent: a ``data:`` line, an ``event:`` line, a comment."""
        with anyio.fail_after(WAIT):
            async for line in self._lines:
                if line:
                    return line
        raise AssertionError("the event stream ended")

    async def rest(self) -> list[dict[str, Any]]:
        """Every remaining message, once the server ends the stream."""
        with anyio.fail_after(WAIT):
            return [
                json.loads(line[len("data:") :])
                async for line in self._lines
                if line.startswith("data:")
            ]

    async def aclose(self) -> None:
        await self._lines.aclose()  # type: ignore[attr-defined]


@contextlib.asynccontextmanager
async def streaming(
    client: httpx.AsyncClient, body: Any, *, headers: Mapping[str, str | None] | None = None
) -> AsyncIterator[tuple[httpx.Response, Events]]:
    """POST ``body`` and read the response as it arrives; leaving closes the connection."""
    content = json.dumps(body).encode()
    async with client.stream(
        "POST", "/mcp", content=content, headers=merged(headers_for(body), headers)
    ) as response:
        events = Events(response)
        try:
            yield response, events
        finally:
            await events.aclose()


async def call_asgi(
    app: Any,
    headers: list[tuple[bytes, bytes]],
    chunks: list[bytes],
    *,
    method: str = "POST",
    path: str = "/mcp",
) -> tuple[int, dict[bytes, bytes], bytes]:
    """Drive ``app`` with a hand-made ASGI scope (header names exactly as given), the body in
    ``chunks``; ``(status, headers, body)`` of the answer."""
    incoming = [
        {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
        for i, chunk in enumerate(chunks or [b""])
    ]
    sent: list[dict[str, Any]] = []
    done = anyio.Event()

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop(0)
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            done.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
    }
    with anyio.fail_after(5):
        await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], dict(start["headers"]), body
