"""One entry for a client message, whatever transport carried it.

:func:`serve` decides what a decoded message is: an answer to one of the server's requests
(the 2025-11-25 back-channel), a cancel, a ``subscriptions/listen``, or a request or
notification of one era (:class:`~engine.protocol.era.Era`), and serves it. What differs between
transports is behind a :class:`Channel`: what the transport knows of the message, how it
answers, how a request runs (what may precede its answer, what a hang-up does), how it streams
and how it cancels. A transport frames bytes, applies the rules of its medium, and hands each
message here.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Protocol

from anyio.streams.memory import MemoryObjectSendStream

from engine._internal.notify import Notify
from engine.auth.provider import AccessToken
from engine.errors import INTERNAL_ERROR, INVALID_REQUEST, MCPError
from engine.fleet.sessions import LegacySession
from engine.protocol import legacy
from engine.protocol.dispatch import Response, dispatch, error_response
from engine.protocol.era import LEGACY_HEADER_VERSIONS, Era, era_of
from engine.protocol.errors import error_of, legacy_status_of, status_of, store_error
from engine.protocol.jsonrpc import (
    Message,
    error_bytes,
    is_response,
    parse,
    request_id_of,
    result_bytes,
)
from engine.protocol.modern import (
    META_LOG_LEVEL,
    META_VERSION,
    SUPPORTED_VERSIONS,
    Exchange,
    HeaderCheck,
)
from engine.protocol.served import Served
from stores import StoreUnavailable

log = logging.getLogger("engine.protocol")

SESSION_NOT_FOUND = (
    "Session not found: it ended or expired; send initialize again without MCP-Session-Id"
)
ANSWER_WITHOUT_SESSION = (
    "Bad Request: an answer to a server request needs the MCP-Session-Id of the session that "
    "was asked"
)
ACCEPTED = Response(202, None)
"""The answer to a notification, or to an answer: nothing (HTTP: 202 without a body)."""

Feed = Callable[[MemoryObjectSendStream[bytes]], Coroutine[Any, Any, None]]
"""Fills an event stream with serialised messages until it is done or cancelled."""


class Replies(Protocol):
    """What precedes one request's answer, on the way its transport opened for it."""

    async def notify(self, method: str, params: dict[str, Any]) -> None: ...

    async def message(self, data: bytes) -> None:
        """A serialised notification or server→client request (the 2025-11-25 back-channel)."""
        ...

    async def close_connection(self) -> None:
        """End what carries this request's messages now (``ctx.close_sse_stream()``); the
        request goes on, for its client to resume."""
        ...


Serve = Callable[[Replies | None], Coroutine[Any, Any, Response]]
"""Serves one request; ``None``: nothing may precede its answer."""


class Channel(Protocol):
    """What a transport supplies for one message (stdio: its connection; HTTP: the request)."""

    @property
    def headers(self) -> Mapping[str, str] | None:
        """The request's headers, lower-case names; ``None``: the transport has none."""
        ...

    @property
    def access_token(self) -> AccessToken | None: ...

    @property
    def client(self) -> str | None:
        """The client's network address."""
        ...

    @property
    def validate(self) -> HeaderCheck | None:
        """The transport's checks of a 2026-07-28 request's headers, once ``_meta`` is known."""
        ...

    @property
    def exchange(self) -> Exchange:
        """What the transport knows of a 2026-07-28 request (headers, ``validate``, token,
        client), without a way to notify: built once for the channel, not for every request."""
        ...

    @property
    def session(self) -> LegacySession | None:
        """The 2025-11-25 session this channel holds (a connection, after its ``initialize``)."""
        ...

    @property
    def session_id(self) -> str | None:
        """The 2025-11-25 session the message names (HTTP: ``MCP-Session-Id``), to be found."""
        ...

    @property
    def connection(self) -> bool:
        """Whether the channel carries the server's requests and their answers itself, so an
        answer needs no session named (stdio)."""
        ...

    @property
    def stateless(self) -> bool:
        """2025-11-25 requests are served without sessions (``stateless_http``)."""
        ...

    def principal(self) -> str | None:
        """Who makes the request (the ``principal`` a new session is bound to); may raise."""
        ...

    def respond(self, response: Response) -> Awaitable[None]:
        """Answer the message (``response.body`` ``None``: nothing to answer)."""
        ...

    def request(
        self, era: Era, raw: dict[str, Any], notifies: bool, serve: Serve
    ) -> Awaitable[object]:
        """Run one request by this transport's rules for ``era`` and answer it: ``serve``
        given where what precedes the answer goes (``notifies``: the request asked for
        notifications before its answer), the hang-up rule of the era applied."""
        ...

    async def stream(self, feed: Feed) -> None:
        """Open an event stream to the client, fed by ``feed`` until the client leaves."""
        ...

    async def cancel(self, era: Era, request_id: Any) -> None:
        """``notifications/cancelled`` of a request: cancel it, where this transport cancels
        that way in ``era``."""
        ...

    def opened(self, session: LegacySession) -> None:
        """An ``initialize`` opened ``session``: the messages that name it belong to it."""
        ...


def in_order(raw: Any, in_session: bool) -> bool:
    """Whether a connection serves ``raw`` before it reads the next message: an answer to a
    server request, a cancel, and a 2025-11-25 ``initialize`` (what follows belongs to the
    session it opens: a client that sends its first call without waiting for the answer must
    not see that call served outside it). The rest may be served concurrently."""
    if type(raw) is not dict:
        return False
    method = raw.get("method")
    if method is None:
        return is_response(raw)
    if method == "notifications/cancelled":
        return True
    return method == "initialize" and not in_session and era_of(raw) is Era.V2025_11_25


def serve(server: Served, raw: Any, channel: Channel) -> Awaitable[object]:
    """Serve one decoded client message on ``channel``.

    A plain function returning the awaitable, so that a 2026-07-28 request is served one
    coroutine less deep: it is most of what a server serves."""
    if type(raw) is not dict:  # refused by dispatch, with its reason
        return channel.request(Era.V2026_07_28, raw, False, _modern(server, raw, channel))
    method = raw.get("method")
    params = raw.get("params")
    meta = params.get("_meta") if type(params) is dict else None
    era_2025 = (type(meta) is not dict or META_VERSION not in meta) and (
        channel.session is not None or era_of(raw, headers=channel.headers) is Era.V2025_11_25
    )
    if method is None and is_response(raw) and (era_2025 or channel.connection):
        return _answer(server, raw, channel)
    if era_2025:
        return _serve_2025(server, raw, method, channel)
    notifies = False
    if "id" in raw:
        if method == "subscriptions/listen":
            return _listen(server, raw, channel)
        notifies = type(meta) is dict and ("progressToken" in meta or META_LOG_LEVEL in meta)
    elif method == "notifications/cancelled":
        return _cancel_2026(server, raw, channel)
    return channel.request(Era.V2026_07_28, raw, notifies, _modern(server, raw, channel))


async def _cancel_2026(server: Served, raw: dict[str, Any], channel: Channel) -> None:
    """``notifications/cancelled``: the request cancelled where the channel cancels that way,
    then the notification served as any other (through the middleware, when there is some)."""
    request_id = _cancelled(raw)
    if request_id is not None:
        await channel.cancel(Era.V2026_07_28, request_id)
    await channel.request(Era.V2026_07_28, raw, False, _modern(server, raw, channel))


def _modern(server: Served, raw: Any, channel: Channel) -> Serve:
    def serve_2026(replies: Replies | None) -> Coroutine[Any, Any, Response]:
        exchange = channel.exchange
        if replies is not None:
            exchange = notifying(exchange, replies.notify)
        return dispatch(server, raw, exchange)

    return serve_2026


def notifying(exchange: Exchange, notify: Notify) -> Exchange:
    """``exchange`` with a way to send notifications before the answer."""
    if exchange.notify == notify:  # a connection's own, as built (a bound method each time)
        return exchange
    return Exchange(
        exchange.headers, notify, exchange.validate, exchange.access_token, exchange.client
    )


KNOWN_VERSIONS = LEGACY_HEADER_VERSIONS | set(SUPPORTED_VERSIONS)
"""What a session's ``MCP-Protocol-Version`` may say: a version this server serves at all."""


def _cancelled(raw: dict[str, Any]) -> str | int | None:
    """The id a cancel names; ``None`` (nothing to cancel) for one no request can have."""
    params = raw.get("params")
    request_id = params.get("requestId") if type(params) is dict else None
    return request_id if type(request_id) is str or type(request_id) is int else None


async def _listen(server: Served, raw: dict[str, Any], channel: Channel) -> None:
    """``subscriptions/listen``: an acknowledgement, then the matching notifications on the
    channel's stream; a refusal before the stream begins is the answer."""
    from engine.protocol.subscriptions import Subscription
    from engine.protocol.subscriptions import listen as serve_listen

    streaming = False

    async def stream(subscription: Subscription) -> None:
        nonlocal streaming
        streaming = True
        await channel.stream(subscription.run)

    request_id = raw.get("id")
    try:
        answered = await serve_listen(server, raw, channel.exchange, stream)
    except Exception as exc:  # whatever a request ends in, the transport serves on
        if not streaming:  # once the stream has begun, there is no response left to send
            await channel.respond(error_response(request_id, error_of(exc, server.metrics)))
        return
    if answered is not None:  # a middleware answered in the server's place
        await channel.respond(Response(200, result_bytes(request_id, answered)))


async def named_session(
    server: Served, session_id: str, principal: str | None
) -> LegacySession | tuple[int, MCPError]:
    """The session ``session_id`` names, if ``principal`` opened it; else the status and error
    to answer with (404: another principal's session is answered as if it did not exist; 503:
    the store cannot say)."""
    try:
        session = await server.sessions.get(session_id)
    except StoreUnavailable as exc:
        error = store_error(exc, server.metrics)
        return status_of(error), error
    if session is not None and not session.owned_by(principal):
        log.warning("session %s refused: it belongs to another principal", session_id[:64])
        session = None
    if session is None:
        return 404, MCPError(INVALID_REQUEST, SESSION_NOT_FOUND)
    return session


REFUSED: Any = object()
"""What :func:`requester_session` returns once the message is answered."""


async def requester_session(
    server: Served,
    principal_of: Callable[[], str | None],
    held: LegacySession | None,
    session_id: str | None,
    request_id: Any,
    respond: Callable[[Response], Awaitable[None]],
) -> tuple[str | None, LegacySession | None]:
    """Who makes a 2025-11-25 request (``principal_of()``: the ``principal`` callback, or the
    token's issuer and subject), and the session it belongs to (``held``, or the one
    ``session_id`` names, found); `REFUSED` once ``respond`` answered it: 500 for a failing
    ``principal`` callback, 404 or 503 for a session that cannot be had. Every transport's
    2025-11-25 requests (a POST's message, a session's ``GET`` or ``DELETE``) go through it."""
    try:
        principal = principal_of()
    except Exception:
        error = MCPError(INTERNAL_ERROR, "Internal error")
        await respond(Response(500, error_bytes(request_id, error)))
        return REFUSED  # type: ignore[no-any-return]
    session = held
    if session is None and session_id is not None:
        found = await named_session(server, session_id, principal)
        if type(found) is tuple:
            status, error = found
            await respond(Response(status, error_bytes(request_id, error)))
            return REFUSED  # type: ignore[no-any-return]
        assert isinstance(found, LegacySession)
        session = found
    return principal, session


async def _session_of(
    server: Served, channel: Channel, request_id: Any
) -> tuple[str | None, LegacySession | None]:
    """:func:`requester_session` of the message ``channel`` carries."""
    return await requester_session(
        server, channel.principal, channel.session, channel.session_id, request_id, channel.respond
    )


async def _answer(server: Served, raw: dict[str, Any], channel: Channel) -> None:
    """A client's answer to a server→client request: to the call that waits for it, here or
    on another replica."""
    held = await _session_of(server, channel, None)
    if held is REFUSED:
        return
    session = held[1]
    if session is None and not channel.connection:
        error = MCPError(INVALID_REQUEST, ANSWER_WITHOUT_SESSION)
        await channel.respond(Response(400, error_bytes(None, error)))
        return
    await server.backchannel.deliver(raw, session.id if session is not None else None)
    await channel.respond(ACCEPTED)


async def _serve_2025(server: Served, raw: dict[str, Any], method: Any, channel: Channel) -> None:
    """A message of the 2025-11-25 era: ``initialize``, a session's request or notification."""
    request_id = request_id_of(raw)
    held = await _session_of(server, channel, request_id)
    if held is REFUSED:
        return
    principal, session = held
    version = channel.headers.get("mcp-protocol-version") if channel.headers is not None else None
    if session is not None and version is not None and version.strip() not in KNOWN_VERSIONS:
        error = MCPError(
            INVALID_REQUEST,
            f"Bad Request: unsupported MCP-Protocol-Version {version.strip()[:40]!r}; send "
            f"{session.protocol_version!r}, the version initialize negotiated",
        )
        await channel.respond(Response(400, error_bytes(request_id, error)))
        return
    if "id" not in raw:
        cancelled = _cancelled(raw) if method == "notifications/cancelled" else None
        if cancelled is not None:
            await channel.cancel(Era.V2025_11_25, cancelled)
        if server.middleware:
            try:
                message = parse(raw)
            except MCPError:
                message = None  # not a notification at all: nothing to observe
            if message is not None:
                await legacy.observe(
                    server, message, session, channel.headers, channel.access_token
                )
        await channel.respond(ACCEPTED)
        return
    try:
        message = parse(raw)
    except MCPError as exc:
        await channel.respond(error_response(request_id, exc))
        return

    def serve_2025(replies: Replies | None) -> Coroutine[Any, Any, Response]:
        assert replies is not None, "a 2025-11-25 request may always be preceded"
        return _legacy(server, message, channel, session, principal, replies)

    await channel.request(Era.V2025_11_25, raw, True, serve_2025)


async def _legacy(
    server: Served,
    message: Message,
    channel: Channel,
    session: LegacySession | None,
    principal: str | None,
    replies: Replies,
) -> Response:
    exchange = legacy.LegacyExchange(
        session,
        outbox=replies.message,
        headers=channel.headers,
        notify=replies.notify,
        access_token=channel.access_token,
        principal=principal,
        client=channel.client,
        stateless=channel.stateless,
    )
    exchange.extras["close_stream"] = replies.close_connection
    try:
        body = result_bytes(message.id, await legacy.handle(server, message, exchange))
        status = 200
    except Exception as exc:  # whatever a request ends in, the transport serves on
        error = error_of(exc, server.metrics)
        status, body = legacy_status_of(error), error_bytes(message.id, error)
    if exchange.new_session is not None:
        channel.opened(exchange.new_session)
    return Response(status, body)


__all__ = [
    "ACCEPTED",
    "ANSWER_WITHOUT_SESSION",
    "SESSION_NOT_FOUND",
    "Channel",
    "Feed",
    "Replies",
    "Serve",
    "in_order",
    "named_session",
    "serve",
]
