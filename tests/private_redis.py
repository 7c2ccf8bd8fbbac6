"""A private ``redis-server`` a test may kill, pause and restart (outage tests)."""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
from pathlib import Path

import anyio
import anyio.abc

REDIS_SERVER = shutil.which("redis-server")


def free_ports(count: int) -> list[int]:
    """Distinct free ports: every socket stays bound until all are chosen."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]


class PrivateRedis:
    """A redis-server child process on a fixed port that can be killed, paused and restarted."""

    def __init__(self, workdir: Path, port: int, *options: str) -> None:
        self.port = port
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._workdir = workdir
        self._options = options
        self._process: anyio.abc.Process | None = None

    async def start(self) -> None:
        self._process = await anyio.open_process(
            [
                REDIS_SERVER or "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self._workdir),
                *self._options,
            ],
        )
        with anyio.fail_after(10):
            while True:
                if await self._takes_commands():
                    return
                await anyio.sleep(0.02)

    async def _takes_commands(self) -> bool:
        """Whether the server takes commands: it listens before it has loaded its data, and
        until then answers every command with a LOADING error (any other answer, a NOAUTH
        error from a server with a password included, means it is ready)."""
        try:
            stream = await anyio.connect_tcp("127.0.0.1", self.port)
        except OSError:
            return False
        try:
            await stream.send(b"PING\r\n")
            reply = await stream.receive()
        except (OSError, anyio.EndOfStream, anyio.BrokenResourceError):
            return False
        finally:
            await stream.aclose()
        return bool(reply) and not reply.startswith(b"-LOADING")

    async def kill(self) -> None:
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError):  # it may have died by itself
                self._process.kill()
            await self._process.wait()
            await self._process.aclose()
            self._process = None

    def signal(self, sig: signal.Signals) -> None:
        assert self._process is not None
        self._process.send_signal(sig)
