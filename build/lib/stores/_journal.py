"""Journal event encoding and the listing fields derived from it, shared by every store."""

from __future__ import annotations

import math
import time
from typing import Any, NamedTuple

import msgpack

from ._checks import check_call_id
from .packing import pack


class IndexFields(NamedTuple):
    """What the call listing learns from one event (a tuple: one is built per event written)."""

    ts: float
    target: str | None
    kind: str | None


def encode_event(event: dict[str, Any]) -> bytes:
    """Serialise with msgpack so every backend stores, and returns, the same thing."""
    if not isinstance(event, dict):
        raise TypeError(f"journal events must be dicts, got {type(event).__name__}")
    try:
        return pack(event)
    except (TypeError, ValueError, OverflowError) as exc:
        raise TypeError(
            f"journal event is not msgpack-serialisable ({exc}); "
            "use str, bytes, int, float, bool, None, lists and dicts"
        ) from exc


EncodedEvent = tuple[str, bytes, IndexFields]
"""A journal event ready to write: its call id, its encoding, its listing fields."""


def encode_batch(items: list[tuple[str, dict[str, Any]]]) -> list[EncodedEvent]:
    """Every event of an ``append_many`` batch, checked and encoded before any is written: one
    that cannot be fails the whole batch, in every store."""
    encoded = []
    for call_id, event in items:
        check_call_id(call_id)
        encoded.append((call_id, encode_event(event), index_fields(event)))
    return encoded


def decode_event(data: bytes) -> dict[str, Any]:
    """Inverse of `encode_event` (tuples come back as lists, as msgpack has no tuple)."""
    event = msgpack.unpackb(data, raw=False, strict_map_key=False)
    if not isinstance(event, dict):
        raise ValueError("journal entry is not a msgpack map; was it written by another tool?")
    return event


def index_fields(event: dict[str, Any]) -> IndexFields:
    """Read the optional ``ts``/``target``/``kind`` keys.

    An event without a usable ``ts`` counts as now; an empty or non-string target or kind as
    absent.
    """
    ts = event.get("ts")
    target = event.get("target")
    kind = event.get("kind")
    if type(ts) is not float or not math.isfinite(ts):  # the engine's own events skip this
        if isinstance(ts, (int, float)) and not isinstance(ts, bool) and math.isfinite(ts):
            ts = float(ts)
        else:
            ts = time.time()
    return IndexFields(
        ts,
        target if isinstance(target, str) and target else None,
        kind if isinstance(kind, str) and kind else None,
    )
