"""Slow clients cannot hold a replica: a head must arrive within ``head_timeout``, a body must
not stall past ``body_timeout`` nor trickle under ``min_body_rate``, and connections are capped
below the file-descriptor limit, the oldest one serving no request shed first, so a legitimate
call is still served when many slow connections are open, and a connection that cannot be made
room for gets a clean 503. Against a served ``python -m engine serve`` replica, with short
timeouts so each test takes seconds."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from pydantic_core import to_json

from tests.abuse.replica import Replica, read_answer, replica, room_for, status_of
from tests.http_helpers import assert_result, headers_for, request

SHORT = {"ENGINE_HEAD_TIMEOUT": "1", "ENGINE_BODY_TIMEOUT": "1", "ENGINE_MIN_BODY_RATE": "100"}
CLOSED_WITHIN = 5.0
"""Seconds by which a connection past a 1 s timeout must be closed (sweeps run every 0.25 s)."""

HEAD = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


def trickle(sock: socket.socket, data: bytes, every: float, stop: threading.Event) -> None:
    """Send ``data`` a byte at a time, one every ``every`` seconds, until refused or stopped."""
    for byte in data:
        if stop.wait(every):
            return
        try:
            sock.sendall(bytes([byte]))
        except OSError:
            return


@contextlib.contextmanager
def trickling(sock: socket.socket, data: bytes, every: float = 0.2) -> Iterator[None]:
    stop = threading.Event()
    thread = threading.Thread(target=trickle, args=(sock, data, every, stop), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)


def closed_after(sock: socket.socket) -> tuple[float, bytes]:
    started = time.monotonic()
    answer = read_answer(sock, timeout=CLOSED_WITHIN)
    return time.monotonic() - started, answer


def test_a_silent_connection_is_closed_within_the_head_timeout(tmp_path: Path) -> None:
    with replica(tmp_path / "serve.log", **SHORT) as server, server.connect() as sock:
        took, answer = closed_after(sock)
        assert answer == b""
        assert took >= 0.5
        assert_result(server.legitimate_call())


def test_a_head_sent_a_byte_at_a_time_is_closed_with_408(tmp_path: Path) -> None:
    with replica(tmp_path / "serve.log", **SHORT) as server, server.connect() as sock:
        with trickling(sock, HEAD + b"Content-Length: 2\r\n\r\n{}"):
            _, answer = closed_after(sock)
        assert status_of(answer) == 408, answer
        assert b"within 1 s " in answer
        assert_result(server.legitimate_call())


def test_a_stalled_or_trickled_body_is_closed_and_a_slow_steady_one_served(
    tmp_path: Path,
) -> None:
    env = {"ENGINE_HEAD_TIMEOUT": "1", "ENGINE_BODY_TIMEOUT": "1", "ENGINE_MIN_BODY_RATE": "10"}
    with replica(tmp_path / "serve.log", **env) as server:
        with server.connect() as stalled:
            stalled.sendall(HEAD + b"Content-Length: 100\r\n\r\n{")
            closed_after(stalled)
        with server.connect() as slow:
            slow.sendall(HEAD + b"Content-Length: 1000\r\n\r\n")
            with trickling(slow, b"[" * 1000, every=0.25):  # 4 bytes/s, under 10
                closed_after(slow)
        message = request("tools/list")
        body = to_json(message)
        head = "".join(f"{name}: {value}\r\n" for name, value in headers_for(message).items())
        with server.connect() as steady:
            steady.sendall(
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + head.encode()
                + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
            )
            for start in range(0, len(body), 16):  # past the timeout in all, never stalling
                steady.sendall(body[start : start + 16])
                time.sleep(0.2)  # 80 bytes/s, over 10
            answer = read_answer(steady, timeout=10)
        assert status_of(answer) == 200, answer


DESCRIPTORS = 256
"""The replica's ``ulimit -n`` in the tests of the cap: the derived cap sits below it."""


def slow_connections(server: Replica, count: int, head: bytes) -> list[socket.socket]:
    opened = []
    for _ in range(count):
        sock = server.connect()
        if head:
            sock.sendall(head)
        opened.append(sock)
    return opened


def test_many_slow_heads_do_not_stop_a_legitimate_call(tmp_path: Path) -> None:
    """More slow connections than the replica has descriptors: each new one sheds the oldest
    connection still sending its head, so the legitimate call is served at once."""
    room_for(2 * DESCRIPTORS)
    with (
        replica(tmp_path / "serve.log", descriptors=DESCRIPTORS, ENGINE_HEAD_TIMEOUT="60") as (
            server
        ),
        contextlib.ExitStack() as stack,
    ):
        for sock in slow_connections(server, 2 * DESCRIPTORS, HEAD):
            stack.enter_context(sock)
        time.sleep(0.5)
        for _ in range(3):
            assert_result(server.legitimate_call(timeout=5))


def test_a_connection_beyond_a_cap_of_busy_requests_gets_a_clean_503(tmp_path: Path) -> None:
    """Every connection is receiving a body (a request in progress, not shed): one more is
    answered 503, readable by its client, and the replica serves again once they end."""
    room_for(2 * DESCRIPTORS)
    env = {"ENGINE_MAX_CONNECTIONS": "40", "ENGINE_BODY_TIMEOUT": "60"}
    with replica(tmp_path / "serve.log", descriptors=DESCRIPTORS, **env) as server:
        busy = slow_connections(server, 40, HEAD + b"Content-Length: 100\r\n\r\n{")
        time.sleep(0.5)
        with server.connect() as extra:
            extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            answer = read_answer(extra, timeout=10)
        assert status_of(answer) == 503, answer
        assert b"retry-after: 1" in answer.lower()
        for sock in busy:
            sock.close()
        time.sleep(0.5)
        assert_result(server.legitimate_call())


def test_h11_is_held_to_the_same_limits(tmp_path: Path) -> None:
    env = {**SHORT, "ENGINE_BODY_TIMEOUT": "2", "ENGINE_MAX_CONNECTIONS": "20"}
    env["ENGINE_MAX_HEAD_BYTES"] = "4096"
    with replica(tmp_path / "serve.log", h11=True, **env) as server:
        with server.connect() as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"p" * 5000)
            assert status_of(read_answer(sock, timeout=10)) == 431
        with server.connect() as sock:
            closed_after(sock)
        with server.connect() as sock, trickling(sock, HEAD):
            assert status_of(closed_after(sock)[1]) == 408
        with server.connect() as sock:
            sock.sendall(HEAD + b"Content-Length: 100\r\n\r\n{")
            closed_after(sock)
        with contextlib.ExitStack() as stack:
            for sock in slow_connections(server, 40, b"GET /he"):
                stack.enter_context(sock)
            assert_result(server.legitimate_call())
        with contextlib.ExitStack() as stack:
            for sock in slow_connections(server, 20, HEAD + b"Content-Length: 100\r\n\r\n{"):
                stack.enter_context(sock)
            time.sleep(0.3)
            with server.connect() as extra:
                assert status_of(read_answer(extra, timeout=10)) == 503
