"""The 2026-07-28 era: every request carries its version and capabilities in ``_meta``.

Requests are validated here (``_meta``, version), dispatched to the server's operations, and
results decorated as the era requires (``resultType``, caching hints, ``serverInfo``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from time import perf_counter
from typing import Any

from engine._internal.logbridge import forwarding_logs
from engine._internal.notify import Notify
from engine._internal.tracing import RequestTrace
from engine.auth.provider import AccessToken
from engine.calls.reply import CallRequest, ReplyKind, RoundReply
from engine.errors import (
    INVALID_PARAMS,
    UNSUPPORTED_PROTOCOL_VERSION,
    MCPError,
)
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
from engine.protocol.tasks import TASK_OPERATIONS, with_extension
from engine.protocol.traced import request_trace, traced
from engine.scope import RequestScope

MODERN = "2026-07-28"
SUPPORTED_VERSIONS = [MODERN]
LEGACY_HEADER_VERSIONS = frozenset({"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"})
"""The versions of the session era (served through ``initialize``, not in ``_meta``)."""
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_REPLICA = "engine/replica"
META_CALL = "engine/call"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"


HeaderCheck = Callable[[Mapping[str, str], str, dict[str, Any], str], None]
"""``(headers, method, params, protocol version)``; raises :class:`MCPError` on a mismatch."""


@dataclass(slots=True)
class Exchange:
    """What the transport knows about a request. A connection's requests, served concurrently,
    share one, so nothing writes to it once made (not frozen: that costs about 1% of a
    2-round call's instructions, in its constructor)."""

    headers: Mapping[str, str] | None = None
    notify: Notify | None = None
    validate: HeaderCheck | None = None
    """Transport-level checks of ``headers``, run once ``_meta`` is known (HTTP header rules)."""
    access_token: AccessToken | None = None
    """The bearer token the transport verified, when the server requires one."""
    client: str | None = None
    """The client's network address (``RequestScope.client``)."""


def read_meta(params: Any) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``(protocolVersion, clientCapabilities, _meta)``; ``-32602`` when either is missing."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict):
        raise MCPError(
            INVALID_PARAMS,
            f"Invalid params: params._meta with {META_VERSION!r} and {META_CAPABILITIES!r} "
            "is required",
        )
    version = meta.get(META_VERSION)
    capabilities = meta.get(META_CAPABILITIES)
    if not isinstance(version, str):
        raise MCPError(INVALID_PARAMS, f"Invalid params: _meta[{META_VERSION!r}] is required")
    if not isinstance(capabilities, dict):
        raise MCPError(
            INVALID_PARAMS,
            f"Invalid params: _meta[{META_CAPABILITIES!r}] must be an object "
            "({} declares no optional capability)",
        )
    return version, capabilities, meta


def check_version(version: str) -> None:
    if version not in SUPPORTED_VERSIONS:
        message = "Unsupported protocol version"
        if version in LEGACY_HEADER_VERSIONS:  # served too, but by sessions, not in _meta
            message += (
                f": {version} is served through initialize; send it, then each request with "
                "the MCP-Session-Id it returns and no protocolVersion in _meta"
            )
        raise MCPError(
            UNSUPPORTED_PROTOCOL_VERSION,
            message,
            {"supported": list(SUPPORTED_VERSIONS), "requested": version},
        )


Operation = Callable[[Served, dict[str, Any], RequestScope], Awaitable[dict[str, Any] | RoundReply]]


def cacheable(result: dict[str, Any], hint: tuple[int, str]) -> dict[str, Any]:
    """A result with its caching hint: how long clients may keep it (``ttlMs``), and whether
    one user's may serve another (``cacheScope``)."""
    result["ttlMs"], result["cacheScope"] = hint
    return result


def _no_cursor(params: dict[str, Any]) -> None:
    if params.get("cursor") is not None:
        raise MCPError(
            INVALID_PARAMS,
            "Invalid cursor: this server returns every item on the "
            "first page; call again without a cursor",
        )


async def _discover(server: Served, params: dict[str, Any], scope: RequestScope) -> dict[str, Any]:
    capabilities = server.capabilities()
    if not server.serves_subscriptions:  # nothing to listen to: no change is announced
        capabilities = unannounced(capabilities)
    result: dict[str, Any] = {
        "supportedVersions": list(SUPPORTED_VERSIONS),
        "capabilities": with_extension(server, capabilities),
    }
    if server.instructions:
        result["instructions"] = server.instructions
    return cacheable(result, server.result_hints["server/discover"])


def _listing(method: str, listed: Listing) -> Operation:
    """A listing of this era: no cursor (every item is on the first page), cacheable."""

    async def operation(
        server: Served, params: dict[str, Any], scope: RequestScope
    ) -> dict[str, Any]:
        _no_cursor(params)
        return cacheable(listed(server), server.result_hints[method])

    return operation


def _call_request(
    method: str, target: str, params: dict[str, Any], scope: RequestScope, arguments: Any
) -> CallRequest:
    return CallRequest(
        method, target, arguments, params.get("inputResponses"), params.get("requestState"), scope
    )


def round_result(reply: RoundReply) -> dict[str, Any]:
    """The wire result of a round: the final value, an error result, ``input_required``, or a
    task handle."""
    if reply.kind is ReplyKind.TASK:
        created: dict[str, Any] = reply.value
        created["resultType"] = "task"
        return created
    if reply.kind is ReplyKind.INPUT_REQUIRED:
        result: dict[str, Any] = {"resultType": "input_required"}
        if reply.input_requests:
            result["inputRequests"] = reply.input_requests
        if reply.request_state is not None:
            result["requestState"] = reply.request_state
        return result
    result = error_result(reply.error or "error") if reply.kind is ReplyKind.ERROR else reply.value
    if "resultType" not in result:  # an extension's interceptor may answer another
        result["resultType"] = "complete"
    return result


def _call_tool(
    server: Served, params: dict[str, Any], scope: RequestScope
) -> Awaitable[RoundReply]:
    name = params.get("name")
    if type(name) is not str:
        name = string_param(params, "name")
    arguments = params.get("arguments")
    if arguments is not None and type(arguments) is not dict:
        arguments = arguments_param(params)
    return server.operations.call_tool(_call_request("tools/call", name, params, scope, arguments))


async def _get_prompt(server: Served, params: dict[str, Any], scope: RequestScope) -> RoundReply:
    name = string_param(params, "name")
    arguments = arguments_param(params)
    return await server.operations.get_prompt(
        _call_request("prompts/get", name, params, scope, arguments)
    )


async def _read_resource(server: Served, params: dict[str, Any], scope: RequestScope) -> RoundReply:
    uri = string_param(params, "uri")
    reply = await server.operations.read_resource(
        _call_request("resources/read", uri, params, scope, None)
    )
    if reply.kind is ReplyKind.COMPLETE:
        cacheable(reply.value, server.result_hints["resources/read"])
    return reply


def _complete(
    server: Served, params: dict[str, Any], scope: RequestScope
) -> Awaitable[dict[str, Any]]:
    return complete(server, params)


OPERATIONS: dict[str, Operation] = {
    "server/discover": _discover,
    **{method: _listing(method, listed) for method, listed in LISTINGS.items()},
    "tools/call": _call_tool,
    "prompts/get": _get_prompt,
    "resources/read": _read_resource,
    "completion/complete": _complete,
    **TASK_OPERATIONS,
}


def _extension_operation(server: Served, method: str) -> Operation:
    """The operation of a method an extension serves (:func:`extension_method`)."""
    serve = extension_method(server, method)

    def operation(
        server: Served, params: dict[str, Any], scope: RequestScope
    ) -> Awaitable[dict[str, Any]]:
        return serve(params, scope)

    return operation


def handle(server: Served, message: Message, exchange: Exchange) -> Awaitable[bytes]:
    """Serve one modern request; the serialised ``result`` object (errors raise MCPError).

    A plain function returning the awaitable, so that a server that does not trace serves a
    request one coroutine less deep."""
    serve = _serve if not server.middleware else _through_middleware
    spans = server.tracing.spans()
    if spans is None:
        return serve(server, message, exchange, None)
    trace = request_trace(spans, message, exchange.headers, claimed_version(message))
    return traced(trace, serve(server, message, exchange, trace))


def claimed_version(message: Message) -> str | None:
    """The version a request's ``_meta`` names, unchecked (``None`` when it names none)."""
    params = message.params
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(META_VERSION) if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


async def observe(server: Served, message: Message, exchange: Exchange) -> None:
    """A notification of this era through the server's middleware (which it has)."""
    version = claimed_version(message) or MODERN
    await observe_notification(
        server, message, version, exchange.headers, access_token=exchange.access_token
    )


def _through_middleware(
    server: Served, message: Message, exchange: Exchange, trace: RequestTrace | None
) -> Awaitable[bytes]:
    """The request through the server's middleware, then served as any other."""
    ctx = message_context(
        server,
        message,
        claimed_version(message) or MODERN,
        exchange.headers,
        access_token=exchange.access_token,
    )

    def serve(rewritten: Message) -> Awaitable[bytes]:
        return _serve(server, rewritten, exchange, trace)

    return through_middleware(server, message, ctx, serve, modern=True)


async def _serve(
    server: Served, message: Message, exchange: Exchange, trace: RequestTrace | None
) -> bytes:
    params = message.params
    version, capabilities, meta = read_meta(params)
    if exchange.validate is not None and exchange.headers is not None:
        exchange.validate(exchange.headers, message.method, params, version)
    if version != MODERN:
        check_version(version)
    operation = OPERATIONS.get(message.method)
    if operation is None:
        operation = _extension_operation(server, message.method)
    scope = RequestScope(  # positional: keyword arguments are slower, on every request
        message.id, message.method, version, capabilities, exchange.headers, meta, exchange.notify
    )
    if exchange.access_token is not None:
        scope.access_token = exchange.access_token
    if exchange.client is not None:
        scope.client = exchange.client
    if trace is not None:
        scope.trace = trace
    started = perf_counter()
    level = meta.get(META_LOG_LEVEL)
    if level is None or exchange.notify is None:
        outcome = await operation(server, params, scope)
    else:  # the client asked for log records at this level, on this request's stream
        async with forwarding_logs(level, exchange.notify):
            outcome = await operation(server, params, scope)
    if type(outcome) is RoundReply:
        if outcome.cached is not None:
            server.metrics.round_served(message.method, outcome.kind, perf_counter() - started)
            return outcome.cached
        result = round_result(outcome)
        _decorate(server, result)
        if outcome.call_id is not None and server.stamp_results:
            result["_meta"][META_CALL] = outcome.call_id
        body = dumps(result)
        pending = outcome.finish(body)
        if pending is not None:
            await pending
        server.metrics.round_served(message.method, outcome.kind, perf_counter() - started)
        return body
    assert isinstance(outcome, dict)
    outcome.setdefault("resultType", "complete")
    _decorate(server, outcome)
    return dumps(outcome)


def _decorate(server: Served, result: dict[str, Any]) -> None:
    """Name the server in the result's ``_meta``, and the replica that answered when asked to
    (``stamp_results``)."""
    meta = result.get("_meta")
    if type(meta) is not dict:
        meta = result["_meta"] = {}
    meta[META_SERVER_INFO] = server.server_info
    if server.stamp_results:
        meta[META_REPLICA] = server.replica_id
