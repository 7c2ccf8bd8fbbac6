"""Exceptions a user of the engine meets, and the protocol errors it puts on the wire."""

from __future__ import annotations

from typing import Any

from pydantic_core import to_jsonable_python

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022
TOO_MANY_PENDING_CALLS = -32030
"""A 2025-11-25 call would wait for an answer beyond the bound of its session, principal or
replica."""
OVER_BUDGET = -32031
"""A principal, or the replica, is at one of its budgets (tasks, sessions): the message names
the limit and the setting."""


class InvalidSignature(TypeError):
    """A tool, prompt, resource or resolver signature the engine cannot plan.

    Raised by the decorator at registration time, so a broken graph stops the server before any
    client connects. The message names the function and the parameter at fault.
    """


class ToolError(Exception):
    """Raise from a tool body or resolver to end the call with an error result the model reads.

    The text becomes ``Error executing tool NAME: <message>`` in an ``isError`` result.
    """


class UnexpectedToolError(ToolError):
    """A tool called directly (``await mcp.call_tool(...)``) failed with an exception nobody
    raised on purpose, kept as its ``__cause__``; the message names the tool, and does not
    repeat what the exception said."""


class ResourceError(ToolError):
    """A resource failed in a way the client should read about: raised by a resource function,
    the client gets a ``-32603`` error with this message; escaping a tool, it is the tool's
    error, as a :class:`ToolError` would be."""

    code = INTERNAL_ERROR
    """The JSON-RPC error code a client reading the resource gets."""


class ResourceNotFoundError(ResourceError):
    """What the URI names does not exist (a template matched, but there is no such item): the
    client gets ``-32602`` with this message, as for a URI no resource matches."""

    code = INVALID_PARAMS


class UnexpectedResourceError(ResourceError):
    """Reading a resource (or making one from a template) failed with an exception nobody
    raised on purpose, kept as its ``__cause__``; the message says where, and does not repeat
    what the exception said."""


TEMPLATE_FAILED = "Error creating resource from template"
"""What a client reads, before the URI, when a template's function failed unexpectedly."""


class MCPError(Exception):
    """A JSON-RPC error: ends the request with ``error`` instead of ``result``."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_error(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def protocol_error_of(exc: BaseException) -> MCPError | None:
    """The JSON-RPC error ``exc`` stands for, or ``None`` when it is an ordinary failure.

    One of ours stands for itself. Code written for another MCP SDK raises that SDK's error
    class, recognised by its shape so that this package depends on none: a class named
    ``MCPError`` (the exception's own or a base, so subclasses such as a URL-elicitation error
    count) carrying an integer ``code``, a string ``message`` and optional ``data``. Its code,
    message and data reach the client unchanged.
    """
    if isinstance(exc, MCPError):
        return exc
    if not any(cls.__name__ == "MCPError" for cls in type(exc).__mro__):
        return None
    code = getattr(exc, "code", None)
    message = getattr(exc, "message", None)
    if type(code) is not int or not isinstance(message, str):
        return None
    data = getattr(exc, "data", None)
    return MCPError(code, message, None if data is None else to_jsonable_python(data, fallback=str))


class InvalidRequestState(MCPError):
    """The one frozen error for every requestState that cannot be used.

    The reason (expired, tampered, wrong audience...) goes to the log only: a client learns
    nothing about which check failed.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(
            INVALID_PARAMS,
            "Invalid or expired requestState",
            {"reason": "invalid_request_state"},
        )
        self.reason = reason


class InsufficientScope(MCPError):
    """The request's access token lacks a scope the call it reaches needed: a task made by a
    tool with ``scopes=``, or a requestState minted for such a call.

    Over HTTP the transport answers it as it answers a ``tools/call`` without the scopes: 403
    with a ``WWW-Authenticate: Bearer error="insufficient_scope"`` challenge naming them. Where
    no HTTP status can be sent any more, it is this JSON-RPC error.
    """

    def __init__(self, scopes: tuple[str, ...]) -> None:
        super().__init__(
            INVALID_REQUEST,
            f"This request needs the scope {' '.join(scopes)}, which the call it continues "
            "needed: ask the authorization server for a token with it",
            {"requiredScopes": list(scopes)},
        )
        self.scopes = scopes


class StoreOutage(MCPError):
    """The call store did not answer: nothing was recorded, so the same request can be retried.

    Transports answer it with HTTP 503, the status that tells a client or proxy to retry.
    """

    def __init__(self) -> None:
        super().__init__(
            INTERNAL_ERROR,
            "The call store is unavailable; nothing was recorded for this round. Retry the "
            "request shortly.",
        )
