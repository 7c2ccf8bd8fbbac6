"""The official ``mcp`` SDK's ``Client(mcp)`` in process, for tests written against that SDK.

Given something that is not its own server, the official client uses it as a transport: an async
context manager whose value is a pair of streams of its ``SessionMessage``. An ``MCPServer`` is
one (``MCPServer.__aenter__``): each message crosses as serialized JSON into this server's
message session, as on stdio, so the test sees what a real client would. ``mcp`` is imported
only when a client connects; this package does not depend on it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio

from engine.transports._served import Hosted
from engine.transports.messages import serve_messages

BUFFER = 64
"""Messages each direction may hold before the sender waits."""


@contextlib.asynccontextmanager
async def official_client_streams(server: Hosted) -> AsyncIterator[tuple[Any, Any]]:
    """``(read_stream, write_stream)`` of the official client's transport, served by ``server``
    until the client leaves."""
    try:
        import mcp_types
        from mcp.shared.message import SessionMessage
    except ImportError as exc:  # pragma: no cover - the official SDK is what connects
        raise RuntimeError(
            "connecting the official mcp Client in process needs the mcp package installed"
        ) from exc

    to_server, server_reads = anyio.create_memory_object_stream[Any](BUFFER)
    server_writes, from_server = anyio.create_memory_object_stream[Any](BUFFER)
    requests, request_source = anyio.create_memory_object_stream[bytes](BUFFER)

    async def forward_requests() -> None:
        async with server_reads, requests:
            async for message in server_reads:
                json = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await requests.send(json.encode())

    async def reply(data: bytes) -> None:
        message = mcp_types.jsonrpc_message_adapter.validate_json(data, by_name=False)
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await server_writes.send(SessionMessage(message))

    async with server_writes, anyio.create_task_group() as tg:
        tg.start_soon(forward_requests)
        tg.start_soon(serve_messages, server, request_source, reply)
        try:
            async with from_server, to_server:
                yield from_server, to_server
        finally:
            tg.cancel_scope.cancel()


class OfficialClientConnections:
    """The connections of official clients to one server, each entered and left by its task.

    ``async with server`` may be entered by several clients at once; each ``__aexit__`` closes
    the newest connection its own task opened.
    """

    def __init__(self, server: Hosted) -> None:
        self.server = server
        self.open: dict[int, list[contextlib.AbstractAsyncContextManager[Any]]] = {}

    async def enter(self) -> tuple[Any, Any]:
        connection = official_client_streams(self.server)
        streams = await connection.__aenter__()
        self.open.setdefault(anyio.get_current_task().id, []).append(connection)
        return streams

    async def leave(self, *exc: Any) -> bool | None:
        task = anyio.get_current_task().id
        stack = self.open[task]
        connection = stack.pop()
        if not stack:
            del self.open[task]
        return await connection.__aexit__(*exc)


__all__ = ["OfficialClientConnections", "official_client_streams"]
