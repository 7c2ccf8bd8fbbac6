"""One socket write per response: what uvicorn writes in one loop turn reaches the socket once."""

from __future__ import annotations

import asyncio
import json
import socket as stdlib_socket
import threading
import time
from typing import Any

import anyio
import anyio.lowlevel
import pytest
import uvicorn
from uvicorn.protocols.http import auto as http_auto
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from engine.transports import serving
from engine.transports._writes import LARGE_WRITE, CoalescingTransport, coalescing
from examples.bookshop import build
from tests import http_helpers
from tests.conftest import KEY
from tests.http_helpers import headers_for, request

pytestmark = pytest.mark.anyio


class Socket(asyncio.Transport):
    """A stream transport that records each call that would reach the socket."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[bytes]] = []
        self.closing = False
        self.answered = anyio.Event()
        """Set once what was sent ends a JSON body."""

    def _record(self, call: list[bytes]) -> None:
        self.calls.append(call)
        if self.sent().endswith(b"}"):
            self.answered.set()

    def write(self, data: Any) -> None:
        if data:  # as a socket transport, an empty write sends nothing
            self._record([bytes(data)])

    def writelines(self, list_of_data: Any) -> None:
        self._record([bytes(data) for data in list_of_data])

    def sent(self) -> bytes:
        return b"".join(b"".join(call) for call in self.calls)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = True

    def write_eof(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8000)}.get(
            name, default
        )

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


def http_request(body: dict[str, Any]) -> bytes:
    content = json.dumps(body).encode()
    head = "".join(f"{name}: {value}\r\n" for name, value in headers_for(body).items())
    return (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n{head}"
        f"Content-Length: {len(content)}\r\n\r\n"
    ).encode() + content


async def serve_one(protocol: type[asyncio.Protocol]) -> Socket:
    """One discovery request through uvicorn's ``protocol``; the socket once it has answered."""
    app = build(keys=[KEY]).streamable_http_app()
    config = uvicorn.Config(app, log_config=None, lifespan="off", access_log=False)
    config.load()
    connection = protocol(config, ServerState(), {}, asyncio.get_running_loop())  # type: ignore[call-arg]
    socket = Socket()
    connection.connection_made(socket)
    connection.data_received(http_request(request("server/discover")))  # type: ignore[attr-defined]
    with anyio.fail_after(5):
        await socket.answered.wait()
    await anyio.sleep(0.01)  # nothing more follows
    connection.connection_lost(None)
    return socket


@pytest.mark.parametrize("protocol", [HttpToolsProtocol, H11Protocol])
async def test_a_response_reaches_the_socket_in_one_write(protocol: type[asyncio.Protocol]) -> None:
    plain = await serve_one(protocol)
    assert len(plain.calls) == 2  # uvicorn alone: the status line and headers, then the body

    socket = await serve_one(coalescing(protocol))

    assert len(socket.calls) == 1
    head, _, body = socket.sent().partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert json.loads(body)["result"]["supportedVersions"] == ["2026-07-28"]
    assert socket.sent() == plain.sent().replace(
        plain.sent().partition(b"date: ")[2][:29], socket.sent().partition(b"date: ")[2][:29]
    )


async def test_writes_of_one_turn_go_out_together_in_order() -> None:
    socket = Socket()
    transport = CoalescingTransport(socket, asyncio.get_running_loop())
    buffer = bytearray(b"head ")
    transport.write(buffer)
    buffer[:] = b"XXXXX"  # the caller may reuse its buffer once write returns
    transport.writelines([b"body ", b"", memoryview(b"tail")])
    assert socket.calls == []
    assert transport.get_write_buffer_size() == len(b"head body tail")

    await anyio.lowlevel.checkpoint()

    assert socket.calls == [[b"head body tail"]]
    transport.write(b"next turn")
    await anyio.lowlevel.checkpoint()
    assert socket.calls[1:] == [[b"next turn"]]


async def test_what_is_held_is_handed_on_once_it_adds_up_to_a_large_write() -> None:
    socket = Socket()
    transport = CoalescingTransport(socket, asyncio.get_running_loop())
    chunk = b"x" * 4096
    for _ in range(LARGE_WRITE // len(chunk) - 1):
        transport.write(chunk)
    assert socket.calls == []
    transport.write(chunk)  # so the socket's flow control sees a fast writer at once
    assert socket.calls == [[chunk * (LARGE_WRITE // len(chunk))]]
    assert transport.get_write_buffer_size() == 0


async def test_a_large_write_is_sent_at_once_after_what_is_held() -> None:
    socket = Socket()
    transport = CoalescingTransport(socket, asyncio.get_running_loop())
    large = b"x" * LARGE_WRITE
    transport.write(b"head")
    transport.writelines([large, b"tail"])
    assert socket.calls == [[b"head"], [large]]
    await anyio.lowlevel.checkpoint()
    assert socket.calls == [[b"head"], [large], [b"tail"]]


async def test_close_abort_and_write_eof_send_what_is_held_first() -> None:
    for end in ("close", "abort", "write_eof"):
        socket = Socket()
        transport = CoalescingTransport(socket, asyncio.get_running_loop())
        transport.write(b"last words")
        getattr(transport, end)()
        assert socket.calls == [[b"last words"]], end
    with pytest.raises(RuntimeError, match="after write_eof"):
        transport.write(b"more")


async def test_nothing_is_written_to_a_connection_lost_meanwhile() -> None:
    socket = Socket()
    transport = CoalescingTransport(socket, asyncio.get_running_loop())
    transport.write(b"too late")
    socket.closing = True  # the connection was lost before the turn ended
    await anyio.lowlevel.checkpoint()
    assert socket.calls == []


def connect(url: str) -> stdlib_socket.socket:
    host, _, port = url.removeprefix("http://").partition(":")
    return stdlib_socket.create_connection((host, int(port)))


def receive_all(conn: stdlib_socket.socket) -> bytes:
    conn.settimeout(5)
    received = b""
    while data := conn.recv(1 << 20):
        received += data
    return received


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_response_reaches_a_client_that_half_closed_after_asking(loop: str) -> None:
    """On uvloop the client's EOF can be read in the very turn the response was written:
    the response still leaves before the connection closes."""

    answered = threading.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"answered"})
        answered.set()
        time.sleep(0.2)  # noqa: ASYNC251 - the rest of the turn: other work, while the EOF arrives

    with http_helpers.serving(app, loop=loop) as url:
        conn = connect(url)
        conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answered.wait(5)
        conn.shutdown(stdlib_socket.SHUT_WR)  # while the response is still held
        received = receive_all(conn)
        conn.close()
    assert received.startswith(b"HTTP/1.1 200 OK\r\n")
    assert received.endswith(b"answered\r\n0\r\n\r\n")


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_fast_writer_is_held_back_by_a_slow_reader(
    loop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An app that streams without ever yielding still waits for the socket to drain."""
    chunks = 4096  # 16 MiB: more than the kernel's socket buffers take
    chunk = b"0123456789abcdef" * 256  # 4 KiB
    drains = []
    drain = FlowControl.drain

    async def counted(self: FlowControl) -> None:
        drains.append(1)
        await drain(self)

    monkeypatch.setattr(FlowControl, "drain", counted)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = [(b"content-length", b"%d" % (chunks * len(chunk)))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for _ in range(chunks):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    with http_helpers.serving(app, loop=loop) as url:
        conn = connect(url)
        conn.setsockopt(stdlib_socket.SOL_SOCKET, stdlib_socket.SO_RCVBUF, 65536)
        conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        time.sleep(0.3)  # not reading yet
        received = receive_all(conn)
        conn.close()
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK")
    assert body == chunk * chunks
    assert drains  # uvicorn waited for the socket instead of buffering 16 MiB


def test_served_apps_write_through_it_unless_given_their_own_protocol(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chosen: list[Any] = []

    def run(self: uvicorn.Server, sockets: Any = None) -> None:
        chosen.append(self.config.http)
        self.started = True

    monkeypatch.setattr(serving.DrainingServer, "run", run)
    app = build(keys=[KEY]).streamable_http_app()
    for settings in ({}, {"http": "httptools"}, {"http": "h11"}, {"http": H11Protocol}):
        serving.serve(app, host="127.0.0.1", port=0, settings={"log_config": None, **settings})
    monkeypatch.setattr(http_auto, "AutoHTTPProtocol", H11Protocol)  # as without httptools
    serving.serve(app, host="127.0.0.1", port=0, settings={"log_config": None})
    assert chosen == [
        coalescing(HttpToolsProtocol),
        coalescing(HttpToolsProtocol),
        coalescing(H11Protocol),
        H11Protocol,
        coalescing(H11Protocol),
    ]
