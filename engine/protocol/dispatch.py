"""From one decoded client message to one response: era choice, errors, HTTP status hints."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from engine._internal.metrics import Metrics, reason_label
from engine.errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    InvalidRequestState,
    MCPError,
    StoreOutage,
)
from engine.protocol import modern
from engine.protocol.jsonrpc import error_bytes, parse, request_id_of, result_bytes
from engine.protocol.modern import Exchange
from engine.protocol.served import Served
from engine.store_services.ledger import store_error
from stores import StoreUnavailable

log = logging.getLogger("engine.protocol")

STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    METHOD_NOT_FOUND: 404,
    HEADER_MISMATCH: 400,
    MISSING_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    INTERNAL_ERROR: 500,
}


@dataclass(slots=True)
class Response:
    """A response body (``None`` for an accepted notification) and its HTTP status."""

    status: int
    body: bytes | None


def status_of(error: MCPError) -> int:
    if isinstance(error, StoreOutage):
        return 503
    return STATUS.get(error.code, 400)


def error_of(exc: Exception, metrics: Metrics) -> MCPError:
    """The error a client gets for an exception that ended its request."""
    if isinstance(exc, MCPError):
        return exc
    if isinstance(exc, StoreUnavailable):
        return store_error(exc, metrics)
    log.error("a request failed unexpectedly", exc_info=exc)
    return MCPError(INTERNAL_ERROR, "Internal error; the server log has the details")


def error_response(request_id: Any, error: MCPError) -> Response:
    return Response(status_of(error), error_bytes(request_id, error))


async def dispatch(server: Served, raw: Any, exchange: Exchange) -> Response:
    """Serve one decoded JSON-RPC message."""
    try:
        message = parse(raw)
        if not message.is_request:
            return Response(202, None)
        body = await modern.handle(server, message, exchange)
        return Response(200, result_bytes(message.id, body))
    except InvalidRequestState as exc:
        log.warning("requestState rejected: %s", exc.reason)
        server.metrics.inc("engine_token_rejections_total", reason=reason_label(exc.reason))
        return error_response(request_id_of(raw), exc)
    except Exception as exc:
        return error_response(request_id_of(raw), error_of(exc, server.metrics))
