"""A real replica for the connection-abuse tests: ``python -m engine serve`` of the bookshop on a
free loopback port, in a subprocess (so its RSS and file descriptors are its own), with raw
sockets to talk to it the way a hostile client does."""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.cli.test_cli import environment
from tests.conftest import KEY
from tests.fleet_helpers import LOOPBACK, ROOT, free_port, healthy_until_stopped
from tests.http_helpers import call, headers_for


@dataclass
class Replica:
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def base(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def rss(self) -> int:
        """Resident memory of the replica's process, in bytes."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS in /proc")

    def connect(self) -> socket.socket:
        sock = socket.create_connection((LOOPBACK, self.port), timeout=10)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def legitimate_call(self, timeout: float = 10) -> httpx.Response:
        """A tools/call a well-behaved client makes, on a connection of its own."""
        body = call("order_book", {"title": "Dune"})
        return httpx.post(f"{self.base}/mcp", json=body, headers=headers_for(body), timeout=timeout)


@contextlib.contextmanager
def replica(
    log: Path, descriptors: int | None = None, *, h11: bool = False, **env: str
) -> Iterator[Replica]:
    """The bookshop served until the block ends; ``env`` adds ``ENGINE_*`` settings, and
    ``descriptors`` sets its file-descriptor limit (soft and hard) as ``ulimit -n`` would.
    ``h11``: served by ``mcp.run`` with uvicorn's pure-Python parser instead of httptools."""
    port = free_port()

    def limit_descriptors() -> None:
        if descriptors is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (descriptors, descriptors))

    argv = [sys.executable, "-m", "engine", "serve", "examples/bookshop_server.py", "--port"]
    argv += [str(port), "--store", "none", "--keys", f"k1={KEY}"]
    if h11:
        argv = [sys.executable, "-m", "tests.abuse.h11_bookshop", str(port)]
        env = {"ENGINE_KEYS": f"k1={KEY}", **env}
    with log.open("ab") as out:
        process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=environment(**env),
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=limit_descriptors,
        )
    with healthy_until_stopped(process, port, log):
        yield Replica(port, process, log)


def read_answer(sock: socket.socket, timeout: float) -> bytes:
    """What the replica sends until it closes the connection (or ``timeout`` passes, which
    fails the test: the connection should have been answered and closed by then)."""
    sock.settimeout(timeout)
    received = b""
    deadline = time.monotonic() + timeout
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return received
        except TimeoutError:
            raise AssertionError(
                f"the connection was still open after {timeout}s; received {received[:200]!r}"
            ) from None
        if not chunk:
            return received
        received += chunk
        sock.settimeout(max(0.01, deadline - time.monotonic()))


def status_of(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
    return int(answer.split(b" ", 2)[1])


def room_for(sockets: int) -> None:
    """Let this test process open ``sockets`` more descriptors (its soft limit raised)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = len(os.listdir("/proc/self/fd")) + sockets + 64
    if soft < wanted:
        assert hard == resource.RLIM_INFINITY or hard >= wanted, f"ulimit -Hn {hard} < {wanted}"
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
