"""The 2025-11-25 era: ``initialize``, sessions, and questions asked on the back-channel.

The same registries, resolvers and round machine as the 2026-07-28 era; only the delivery of
questions differs: a question becomes a server→client request on the call's stream and the round
waits for the answer in place (:class:`~engine.fleet.backchannel.BackChannelAnswers`). Results have
the 2025-11-25 shapes: no ``resultType``, no caching hints.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine._internal.budgets import principal_key
from engine._internal.logbridge import LEVELS, forwarding_logs
from engine._internal.notify import Notify
from engine._internal.tracing import RequestTrace
from engine.auth.provider import AccessToken
from engine.calls.reply import CallRequest, ReplyKind, RoundReply
from engine.errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    MCPError,
)
from engine.fleet.backchannel import BackChannelAnswers, Outbox
from engine.fleet.sessions import LegacySession, bounded_capabilities, bounded_client_info
from engine.handlers.results import error_result
from engine.protocol.common import (
    LISTINGS,
    Listing,
    arguments_param,
    complete,
    extension_method,
    string_param,
    unannounced,
)
from engine.protocol.jsonrpc import Message, dumps
from engine.protocol.middleware import message_context, observe_notification, through_middleware
from engine.protocol.served import Served
from engine.protocol.traced import request_trace, traced
from engine.questions.answers import StatelessAnswers
from engine.questions.rendering import Rendered
from engine.scope import NO_SESSION, RequestScope, Session
from engine.state.call import CallState

LATEST = "2025-11-25"
LEGACY_VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26"]


@dataclass(slots=True)
class LegacyExchange:
    """What the transport provides to one legacy request."""

    session: LegacySession | None
    outbox: Outbox
    """Writes a message (a notification, or a question to the client) on this request's stream."""
    headers: Mapping[str, str] | None = None
    notify: Notify | None = None
    new_session: LegacySession | None = None
    """Set by ``initialize``: the transport returns its id (``MCP-Session-Id``)."""
    access_token: AccessToken | None = None
    """The bearer token the transport verified, when the server requires one."""
    principal: str | None = None
    """Who makes the request (the ``principal`` a new session is bound to)."""
    client: str | None = None
    """The client's network address (``RequestScope.client``)."""
    extras: dict[str, Any] = field(default_factory=dict)
    stateless: bool = False
    """Served without sessions (``stateless_http``): ``initialize`` keeps none, each request
    stands alone, and a call has no channel to ask the client on."""


def session_notifier(server: Served, session: LegacySession) -> Notify:
    """``ctx.session.send_*``: to this session's standalone stream, on whichever replica."""

    async def notify(method: str, params: dict[str, Any]) -> None:
        await server.notify_session(session.id, method, params)

    return notify


async def _initialize(server: Served, message: Message, exchange: LegacyExchange) -> dict[str, Any]:
    params = message.params
    if not isinstance(params, dict):
        raise MCPError(
            INVALID_PARAMS,
            "Invalid params: initialize needs protocolVersion, capabilities and clientInfo",
        )
    requested = params.get("protocolVersion")
    capabilities = params.get("capabilities")
    if not isinstance(requested, str) or not isinstance(capabilities, dict):
        raise MCPError(
            INVALID_PARAMS,
            "Invalid params: initialize needs a protocolVersion string and a capabilities object",
            {"supported": LEGACY_VERSIONS, "requested": requested},
        )
    version = requested if requested in LEGACY_VERSIONS else LATEST
    kept = bounded_capabilities(capabilities)
    session = LegacySession.for_principal(
        exchange.principal, version, kept, bounded_client_info(params.get("clientInfo"))
    )
    if not exchange.stateless:
        server.sessions.admit(principal_key(exchange.principal, exchange.client), session.id)
        try:
            await server.sessions.save(session)
        except BaseException:
            server.sessions.forget(session.id)  # not opened: it does not count
            raise
        exchange.new_session = session
    # 2025-11-25 capabilities have no ``extensions`` (SEP-2133 came later).
    capabilities = {k: v for k, v in server.capabilities().items() if k != "extensions"}
    if exchange.stateless:  # no session stream: no change can reach the client
        capabilities = unannounced(capabilities)
    result: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": server.server_info,
    }
    if server.instructions:
        result["instructions"] = server.instructions
    return result


@dataclass(slots=True)
class LegacyRequest:
    """One request of an initialized session, as its operation receives it."""

    server: Served
    params: dict[str, Any]
    session: LegacySession
    scope: RequestScope
    exchange: LegacyExchange


def _scope(
    server: Served,
    message: Message,
    params: dict[str, Any],
    session: LegacySession,
    exchange: LegacyExchange,
) -> RequestScope:
    meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
    return RequestScope(
        request_id=message.id,
        method=message.method,
        protocol_version=session.protocol_version,
        capabilities=session.capabilities,
        headers=exchange.headers,
        meta=meta or {},
        notify=exchange.notify,
        session=Session(session_notifier(server, session)),
        close_stream=exchange.extras.get("close_stream"),
        access_token=exchange.access_token,
        client=exchange.client,
    )


def _standalone_session(exchange: LegacyExchange) -> LegacySession:
    """The session a request stands in when there are none: the version its header names, no
    client capabilities, kept nowhere."""
    headers = exchange.headers or {}
    version = headers.get("mcp-protocol-version", LATEST)
    if version not in LEGACY_VERSIONS:
        version = LATEST
    return LegacySession("", version, {}, principal=None)


class NoBackChannel(StatelessAnswers):
    """Answers of a request served without a session: nothing can be asked of the client."""

    def answer(self, key: str, question: Rendered, asker: str) -> Any:
        raise MCPError(
            INVALID_REQUEST,
            f"{asker} needs to send {question.question.method!r} to the client, and this "
            "server serves 2025-11-25 clients without sessions (stateless_http=True), so there "
            "is no channel to send it on; serve without stateless_http, or connect with a "
            "2026-07-28 client",
        )


def _answers(request: LegacyRequest) -> BackChannelAnswers | NoBackChannel:
    if request.exchange.stateless:
        return NoBackChannel(CallState(), None, {})
    return BackChannelAnswers(
        request.server.backchannel,
        request.exchange.outbox,
        request.session.capabilities,
        timeout=request.server.legacy_answer_timeout,
        session_id=request.session.id,
        principal=principal_key(request.exchange.principal, request.exchange.client),
    )


def round_result(reply: RoundReply) -> dict[str, Any]:
    """The wire result of a round in this era: the final value or an error result."""
    if reply.kind is ReplyKind.ERROR:
        return error_result(reply.error or "error")
    assert reply.kind is ReplyKind.COMPLETE, "questions are answered in place in this era"
    result: dict[str, Any] = reply.value
    return result


Operation = Callable[[LegacyRequest], Awaitable[dict[str, Any] | bytes]]
"""An operation's result, or its serialised result when it was journaled as sent."""


RoundOperation = Callable[..., Awaitable[RoundReply]]


def _round(method: str, target_param: str) -> Operation:
    """``tools/call``, ``prompts/get`` or ``resources/read``: one round, questions asked in
    place on this request's stream."""
    run: Callable[[Served], RoundOperation] = {
        "tools/call": lambda server: server.operations.call_tool,
        "prompts/get": lambda server: server.operations.get_prompt,
        "resources/read": lambda server: server.operations.read_resource,
    }[method]

    async def operation(request: LegacyRequest) -> bytes:
        params = request.params
        target = string_param(params, target_param)
        arguments = arguments_param(params) if method != "resources/read" else None
        call = CallRequest(method, target, arguments, None, None, request.scope)
        reply = await run(request.server)(call, in_place=_answers(request))
        body = dumps(round_result(reply))
        pending = reply.finish(body)  # journaled with the questions asked and answered in place
        if pending is not None:
            await pending
        return body

    return operation


def _extension_operation(server: Served, method: str) -> Operation:
    """The operation of a method an extension serves (:func:`extension_method`)."""
    serve = extension_method(server, method)
    return lambda request: serve(request.params, request.scope)


async def _set_level(request: LegacyRequest) -> dict[str, Any]:
    level = request.params.get("level")
    if level not in LEVELS:
        raise MCPError(INVALID_PARAMS, f"Invalid params: level must be one of {list(LEVELS)}")
    request.session.log_level = level
    if not request.exchange.stateless:
        await request.server.sessions.save(request.session)
    return {}


def _subscription(subscribe: bool) -> Operation:
    """``resources/subscribe`` and ``unsubscribe``: kept in the session, so on every replica."""

    async def operation(request: LegacyRequest) -> dict[str, Any]:
        uri = string_param(request.params, "uri")
        if request.exchange.stateless:
            raise MCPError(
                INVALID_REQUEST,
                "resources/subscribe needs a session to keep the subscription in, and this "
                "server serves 2025-11-25 clients without sessions (stateless_http=True); "
                "connect with a 2026-07-28 client and use subscriptions/listen",
            )
        session = request.session
        if subscribe != (uri in session.subscriptions):
            if subscribe:
                session.subscriptions.append(uri)
            else:
                session.subscriptions.remove(uri)
            await request.server.sessions.save(session)
        return {}

    return operation


def _listing(listed: Listing) -> Operation:
    """A listing of this era: a cursor is ignored (every item is on the first page)."""

    async def operation(request: LegacyRequest) -> dict[str, Any]:
        return listed(request.server)

    return operation


async def _ping(request: LegacyRequest) -> dict[str, Any]:
    return {}


def _complete(request: LegacyRequest) -> Awaitable[dict[str, Any]]:
    return complete(request.server, request.params)


OPERATIONS: dict[str, Operation] = {
    "ping": _ping,
    **{method: _listing(listed) for method, listed in LISTINGS.items()},
    "tools/call": _round("tools/call", "name"),
    "prompts/get": _round("prompts/get", "name"),
    "resources/read": _round("resources/read", "uri"),
    "logging/setLevel": _set_level,
    "resources/subscribe": _subscription(True),
    "resources/unsubscribe": _subscription(False),
    "completion/complete": _complete,
}


def handle(server: Served, message: Message, exchange: LegacyExchange) -> Awaitable[bytes]:
    """Serve one legacy request; the serialised ``result`` (errors raise MCPError)."""
    serve = _serve if not server.middleware else _through_middleware
    spans = server.tracing.spans()
    if spans is None:
        return serve(server, message, exchange, None)
    session = exchange.session
    version = session.protocol_version if session is not None else None
    trace = request_trace(spans, message, exchange.headers, version)
    return traced(trace, serve(server, message, exchange, trace))


def _protocol_version(message: Message, exchange: LegacyExchange) -> str:
    """The version a request is served in: its session's, the one an ``initialize`` will
    agree, or (without sessions) the one its header names."""
    if message.method == "initialize":
        params = message.params
        requested = params.get("protocolVersion") if isinstance(params, dict) else None
        return requested if isinstance(requested, str) and requested in LEGACY_VERSIONS else LATEST
    if exchange.session is not None:
        return exchange.session.protocol_version
    return _standalone_session(exchange).protocol_version


async def observe(
    server: Served,
    message: Message,
    session: LegacySession | None,
    headers: Mapping[str, str] | None = None,
    access_token: AccessToken | None = None,
) -> None:
    """A notification of this era through the server's middleware (which it has)."""
    await observe_notification(
        server,
        message,
        session.protocol_version if session is not None else LATEST,
        headers,
        Session(session_notifier(server, session)) if session is not None else NO_SESSION,
        access_token,
    )


def _through_middleware(
    server: Served, message: Message, exchange: LegacyExchange, trace: RequestTrace | None
) -> Awaitable[bytes]:
    """The request through the server's middleware, then served as any other."""
    session = exchange.session
    ctx = message_context(
        server,
        message,
        _protocol_version(message, exchange),
        exchange.headers,
        Session(session_notifier(server, session)) if session is not None else NO_SESSION,
        exchange.access_token,
    )

    def serve(rewritten: Message) -> Awaitable[bytes]:
        return _serve(server, rewritten, exchange, trace)

    return through_middleware(server, message, ctx, serve, modern=False)


async def _serve(
    server: Served, message: Message, exchange: LegacyExchange, trace: RequestTrace | None
) -> bytes:
    if message.method == "initialize":
        return dumps(await _initialize(server, message, exchange))
    session = exchange.session
    if session is None and exchange.stateless:
        session = _standalone_session(exchange)
    if session is None:
        raise MCPError(
            INVALID_REQUEST,
            "Bad Request: no session; send initialize first and "
            "then the MCP-Session-Id it returned",
        )
    operation = OPERATIONS.get(message.method) or _extension_operation(server, message.method)
    params = message.params if isinstance(message.params, dict) else {}
    scope = _scope(server, message, params, session, exchange)
    if trace is not None:
        scope.trace = trace
    request = LegacyRequest(server, params, session, scope, exchange)
    asked = session.log_level
    async with forwarding_logs(asked or "info", exchange.notify, records=asked is not None):
        result = await operation(request)
    return result if isinstance(result, bytes) else dumps(result)
