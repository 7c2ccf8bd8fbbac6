"""The span of one request, in either era: made from the message before it is served, ended
with what serving it came to.

Only reached when the server traces (``Served.tracing``); the span's parent is decided at the
request's first round, whose requestState may carry the call's trace.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any

from engine._internal.tracing import RequestTrace
from engine.protocol.jsonrpc import Message

if TYPE_CHECKING:
    from engine._internal.otel_spans import Spans

NAMED = frozenset({"tools/call", "prompts/get"})
"""Methods whose ``name`` param names the span (a resource's URI never does: a template's
parameters are arguments)."""


def request_trace(
    spans: Spans, message: Message, headers: Mapping[str, str] | None, version: str | None
) -> RequestTrace:
    params = message.params if isinstance(message.params, dict) else {}
    meta: Any = params.get("_meta")
    target = params.get("name") if message.method in NAMED else None
    return spans.request(
        message.method, target, message.id, version, headers, meta if type(meta) is dict else None
    )


async def traced(trace: RequestTrace, serving: Awaitable[bytes]) -> bytes:
    """``serving``, awaited under the request's span: its error recorded, the span ended."""
    try:
        body = await serving
    except BaseException as exc:
        trace.failed(exc)
        raise
    trace.ended(None)
    return body
