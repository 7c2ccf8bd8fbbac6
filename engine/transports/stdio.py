"""stdio: newline-delimited JSON-RPC on stdin/stdout; logs go to stderr."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from typing import BinaryIO

import anyio

from engine.transports._served import Hosted
from engine.transports.messages import serve_messages


async def serve_stdio(
    server: Hosted, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None
) -> None:
    """Serve ``server`` on stdin/stdout until stdin closes."""
    source = stdin if stdin is not None else sys.stdin.buffer
    output = stdout if stdout is not None else sys.stdout.buffer
    lock = anyio.Lock()

    def write_line(data: bytes) -> None:
        output.write(data + b"\n")
        output.flush()

    async def write(data: bytes) -> None:
        async with lock:
            await anyio.to_thread.run_sync(write_line, data)

    async def lines() -> AsyncIterator[bytes]:
        while line := await anyio.to_thread.run_sync(source.readline):
            yield line

    await serve_messages(server, lines(), write)
