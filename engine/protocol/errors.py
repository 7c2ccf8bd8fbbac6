"""What a client gets for what went wrong: the JSON-RPC error, and its HTTP status.

A store outage is mapped here and nowhere else: the store services and the session registry let
`StoreUnavailable` rise, and every transport turns it into a `StoreOutage` (HTTP 503, "retry")
with :func:`store_error`, which logs it and counts it in ``engine_store_errors_total`` once.
"""

from __future__ import annotations

import logging

from engine._internal.metrics import Metrics
from engine.errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    OVER_BUDGET,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    MCPError,
    StoreOutage,
    protocol_error_of,
)
from stores import StoreUnavailable

log = logging.getLogger(__name__)

STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    METHOD_NOT_FOUND: 404,
    HEADER_MISMATCH: 400,
    MISSING_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    INTERNAL_ERROR: 500,
    OVER_BUDGET: 429,
}


def id_in_use(request_id: str | int) -> MCPError:
    """A request whose id is that of another request of the same client still running: ids are
    how a client tells its answers apart, so the second is refused rather than served under it."""
    shown = f'"{request_id}"' if isinstance(request_id, str) else str(request_id)
    return MCPError(
        INVALID_REQUEST,
        f"Invalid Request: id {shown} is that of a request of yours still running; give each "
        "request its own id",
    )


def store_error(exc: StoreUnavailable, metrics: Metrics | None = None) -> MCPError:
    """The error for a store that did not answer: logged, counted, and safe to retry."""
    log.error("store unavailable: %s", exc)
    if metrics is not None:
        metrics.inc("engine_store_errors_total")
    return StoreOutage()


def status_of(error: MCPError) -> int:
    """The HTTP status of a 2026-07-28 error response."""
    if isinstance(error, StoreOutage):
        return 503
    return STATUS.get(error.code, 400)


def legacy_status_of(error: MCPError) -> int:
    """The HTTP status of a 2025-11-25 error response to a request that reached its method:
    200, as that era's clients expect a JSON-RPC error to come (they take any other status for
    a failed POST and drop the error), except 503 for a store outage, which a client or proxy
    should retry."""
    return 503 if isinstance(error, StoreOutage) else 200


def error_of(exc: Exception, metrics: Metrics) -> MCPError:
    """The error a client gets for an exception that ended its request."""
    error = protocol_error_of(exc)
    if error is not None:
        return error
    if isinstance(exc, StoreUnavailable):
        return store_error(exc, metrics)
    log.error("a request failed unexpectedly", exc_info=exc)
    return MCPError(INTERNAL_ERROR, "Internal error; the server log has the details")
