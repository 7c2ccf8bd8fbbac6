"""A request head (request line and headers) is capped while it is read: past
``max_head_bytes`` the replica answers 431 and closes, without reading the rest, and what it
remembers of headers it was sent stays small however varied they are. Against a served
``python -m engine serve`` replica, whose RSS is measured."""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path

from tests.abuse.replica import Replica, read_answer, replica, status_of
from tests.http_helpers import assert_result

MiB = 1024 * 1024
BUDGET = 24 * MiB
"""RSS growth allowed for each attack: far below what the attack sends (100 MiB; 512 heads of
48 KiB, each kept twice by an unbounded cache)."""


def send_in_background(sock: socket.socket, data: bytes) -> threading.Thread:
    """Send ``data`` while the caller reads: a refusal arrives before the request is sent."""

    def send() -> None:
        with contextlib.suppress(OSError):  # refused: the replica stopped reading
            sock.sendall(data)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def refused_head(server: Replica, head: bytes) -> bytes:
    with server.connect() as sock:
        sender = send_in_background(sock, head)
        answer = read_answer(sock, timeout=10)
        sender.join(10)
    return answer


def test_a_100_mib_header_is_answered_431_once_the_cap_is_read(tmp_path: Path) -> None:
    with replica(tmp_path / "serve.log") as server:
        assert_result(server.legitimate_call())
        before = server.rss()
        head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * (100 * MiB)
        answer = refused_head(server, head + b"\r\n\r\n")
        assert status_of(answer) == 431, answer[:300]
        assert b"send fewer or shorter headers" in answer
        grown = server.rss() - before
        assert grown < BUDGET, f"RSS grew by {grown / MiB:.0f} MiB"
        assert_result(server.legitimate_call())


def test_200000_headers_are_answered_431(tmp_path: Path) -> None:
    with replica(tmp_path / "serve.log") as server:
        many = b"".join(b"X-H%d: v\r\n" % n for n in range(200_000))
        answer = refused_head(server, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + many)
        assert status_of(answer) == 431, answer[:300]
        assert_result(server.legitimate_call())


def test_a_head_over_a_configured_cap_is_431_and_one_under_it_is_served(tmp_path: Path) -> None:
    with replica(tmp_path / "serve.log", ENGINE_MAX_HEAD_BYTES="4096") as server:
        head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: %s\r\n\r\n"
        answer = refused_head(server, head % (b"p" * 4096))
        assert status_of(answer) == 431, answer[:300]
        assert b"4096 bytes at most" in answer
        with server.connect() as sock:
            sock.sendall(head.replace(b"HTTP/1.1", b"HTTP/1.0") % (b"p" * 3000))
            assert status_of(read_answer(sock, timeout=10)) == 200


def test_many_different_large_allowed_heads_do_not_grow_rss(tmp_path: Path) -> None:
    """Each head is under the cap, and each differs: a cache of decoded headers, or of Host and
    Origin decisions, that kept them would hold hundreds of them."""
    with replica(tmp_path / "serve.log") as server:
        assert_result(server.legitimate_call())
        before = server.rss()
        with server.connect() as sock:
            for n in range(512):
                pad = b"%06d" % n * 4000  # 24 KB, unique per request
                origin = b"http://%06d.example" % n + b"o" * 24_000
                sock.sendall(
                    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 2\r\nX-Pad: " + pad + b"\r\nOrigin: " + origin + b"\r\n\r\n{}"
                )
                response = b""
                while b"\r\n\r\n" not in response:
                    chunk = sock.recv(65536)
                    assert chunk, "the replica closed the connection"
                    response += chunk
                length = int(response.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                while len(response.split(b"\r\n\r\n", 1)[1]) < length:
                    response += sock.recv(65536)
                assert status_of(response) == 403, response[:300]
        grown = server.rss() - before
        assert grown < BUDGET, f"RSS grew by {grown / MiB:.0f} MiB"
