"""One socket write per response: what uvicorn writes in one loop turn reaches the socket once."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anyio
import anyio.lowlevel
import pytest
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from engine.transports import serving
from engine.transports.writes import LARGE, CoalescingTransport, coalescing
from examples.bookshop import build
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

    assert socket.calls == [[b"head ", b"body ", b"tail"]]
    transport.write(b"next turn")
    await anyio.lowlevel.checkpoint()
    assert socket.calls[1:] == [[b"next turn"]]


async def test_a_large_write_is_sent_at_once_after_what_is_held() -> None:
    socket = Socket()
    transport = CoalescingTransport(socket, asyncio.get_running_loop())
    large = b"x" * LARGE
    transport.write(b"head")
    transport.write(large)
    assert socket.calls == [[b"head"], [large]]
    await anyio.lowlevel.checkpoint()
    assert socket.calls == [[b"head"], [large]]


async def test_close_sends_what_is_held_first_and_abort_drops_it() -> None:
    socket = Socket()
    transport = CoalescingTransport(socket, asyncio.get_running_loop())
    transport.write(b"last words")
    transport.close()
    assert socket.calls == [[b"last words"]]
    assert transport.is_closing()

    aborted = Socket()
    transport = CoalescingTransport(aborted, asyncio.get_running_loop())
    transport.write(b"never sent")
    transport.abort()
    await anyio.lowlevel.checkpoint()
    assert aborted.calls == []


async def test_nothing_is_written_to_a_connection_lost_meanwhile() -> None:
    socket = Socket()
    transport = CoalescingTransport(socket, asyncio.get_running_loop())
    transport.write(b"too late")
    socket.closing = True  # the peer went away before the turn ended
    await anyio.lowlevel.checkpoint()
    assert socket.calls == []


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
    assert chosen == [
        coalescing(HttpToolsProtocol),
        coalescing(HttpToolsProtocol),
        coalescing(H11Protocol),
        H11Protocol,
    ]
