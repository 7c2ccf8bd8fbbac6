"""The trace field a requestState carries: the call's trace context, in binary.

Apart from the spans (``engine._internal.otel_spans``) so that reading a token
(``python -m engine inspect``) needs no OpenTelemetry.
"""

from __future__ import annotations

CARRIED_BYTES = 33
"""A requestState's trace field: trace id (16 bytes), the span id of round 1's request (8), the
span id of the round that minted it (8, zeros when it recorded none), trace flags (1): the
fields of a W3C ``traceparent``, in binary."""
SAMPLED = 0x01


def carry(trace_id: int, root_id: int, previous_id: int, flags: int) -> bytes:
    """The trace field a requestState carries."""
    return (
        trace_id.to_bytes(16, "big")
        + root_id.to_bytes(8, "big")
        + previous_id.to_bytes(8, "big")
        + bytes((flags & SAMPLED,))
    )


def carried_fields(data: bytes) -> tuple[int, int, int, int] | None:
    """``(trace id, round 1's request span id, the previous round's span id, flags)`` of a
    trace field; ``None`` for one of another layout, or without a trace."""
    if len(data) != CARRIED_BYTES:
        return None
    trace_id = int.from_bytes(data[:16], "big")
    root_id = int.from_bytes(data[16:24], "big")
    if not trace_id or not root_id:
        return None
    return trace_id, root_id, int.from_bytes(data[24:32], "big"), data[32] & SAMPLED
