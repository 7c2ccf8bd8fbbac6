"""Running a server's middleware around one inbound message, in whichever era it is served.

Each era calls in here once it knows the message is its own, and only when the server has
middleware: :func:`through_middleware` for a request (the era's own serving is the end of the
chain), :func:`observe_notification` for a notification (nothing after the chain). The chain
sees a result as the client would, a dict of its wire form; what the chain returns is
serialised again, so a middleware may change it or answer with a result of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pydantic import BaseModel

from engine.auth.provider import AccessToken
from engine.middleware import HandlerResult, ServerRequestContext, chained
from engine.protocol.jsonrpc import Message, dumps, loads
from engine.protocol.served import Served
from engine.scope import NO_SESSION, Session
from engine.types import wire_of

log = logging.getLogger("engine.protocol")

Serve = Callable[[Message], Awaitable[bytes]]
"""The era's own serving of a (possibly rewritten) request: its serialised result."""


def message_context(
    server: Served,
    message: Message,
    protocol_version: str,
    headers: Mapping[str, str] | None = None,
    session: Session = NO_SESSION,
    access_token: AccessToken | None = None,
) -> ServerRequestContext[Any, Any]:
    params = message.params if isinstance(message.params, Mapping) else None
    meta = params.get("_meta") if params is not None else None
    return ServerRequestContext(
        method=message.method,
        params=params,
        request_id=message.id,
        meta=meta if isinstance(meta, dict) else None,
        protocol_version=protocol_version,
        headers=headers,
        lifespan_context=server.lifespan_context,
        session=session,
        access_token=access_token,
    )


async def through_middleware(
    server: Served,
    message: Message,
    ctx: ServerRequestContext[Any, Any],
    serve: Serve,
    *,
    modern: bool,
) -> bytes:
    """The serialised result of ``message`` served through the middleware, ``serve`` last.
    What the chain raises ends the request as any handler's error does (``error_of`` at the
    transport: an ``MCPError``, ours or another SDK's, as itself)."""

    async def last(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        params = ctx.params
        if params is not None and type(params) is not dict:
            params = dict(params)
        body = await serve(Message(ctx.method, params, message.id, True))
        result: dict[str, Any] = loads(body)
        return result

    result = await chained(server.middleware, last)(ctx)
    return dumps(wire_result(result, ctx.method, modern=modern))


def wire_result(result: HandlerResult, method: str, *, modern: bool) -> dict[str, Any]:
    """What the chain returned, as the result's wire form."""
    if result is None:
        wire: dict[str, Any] = {}
    elif isinstance(result, BaseModel):
        wire = wire_of(result)
    elif isinstance(result, Mapping):
        wire = dict(result)
    else:
        raise TypeError(
            f"a middleware answered {method} with a {type(result).__name__}; return what "
            "call_next returned, a dict of the result, a pydantic model of its shape, or None"
        )
    if modern:
        wire.setdefault("resultType", "complete")
    return wire


async def observe_notification(
    server: Served,
    message: Message,
    protocol_version: str,
    headers: Mapping[str, str] | None = None,
    session: Session = NO_SESSION,
    access_token: AccessToken | None = None,
) -> None:
    """Pass a client notification through the middleware. A notification has no answer: what
    the chain returns is dropped, and what it raises is logged."""
    ctx = message_context(server, message, protocol_version, headers, session, access_token)

    async def last(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        return None

    try:
        await chained(server.middleware, last)(ctx)
    except Exception:
        log.exception("middleware raised on the notification %s", message.method)


__all__ = [
    "message_context",
    "observe_notification",
    "through_middleware",
    "wire_result",
]
