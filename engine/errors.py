"""Exceptions a user of the engine meets, and the protocol errors it puts on the wire."""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022
TOO_MANY_PENDING_CALLS = -32030
"""A 2025-11-25 call would wait for an answer beyond the bound of its session or replica."""


class InvalidSignature(TypeError):
    """A tool, prompt, resource or resolver signature the engine cannot plan.

    Raised by the decorator at registration time, so a broken graph stops the server before any
    client connects. The message names the function and the parameter at fault.
    """


class ToolError(Exception):
    """Raise from a tool body or resolver to end the call with an error result the model reads.

    The text becomes ``Error executing tool NAME: <message>`` in an ``isError`` result.
    """


class ResourceError(ToolError):
    """A resource handler failed in a way the client should read about."""


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
    """``exc`` as a JSON-RPC error when it is one of another library's shape (the official
    SDK's ``MCPError``: an ``error`` with an int ``code``, a str ``message`` and ``data``)."""
    code, message = getattr(exc, "code", None), getattr(exc, "message", None)
    if type(code) is not int or not isinstance(message, str) or not hasattr(exc, "error"):
        return None
    return MCPError(code, message, getattr(exc, "data", None))


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
