"""A journal event as the store keeps it: what a listing needs in the clear, the rest sealed.

The store holds a round's listing fields (when, which target, how it ended, which replica and
code) as they are, and its payload (arguments, questions, answers, checkpoints, the response)
sealed with the server's key ring, so a store file or a Redis dump shows no user data. A payload
over ``max_bytes`` loses its largest parts, each named under ``truncated`` with its size, so a
reader can say that the round cannot be replayed exactly instead of replaying something else.
"""

from __future__ import annotations

from typing import Any

import msgpack

from engine.errors import InvalidRequestState
from engine.state.seal import KeyRing
from stores.packing import pack

PURPOSE = b"engine/journal/v2"
"""Bound to every sealed payload: it opens as a journal payload and as nothing else."""
VERSION = 2
PAYLOAD = ("arguments", "questions", "answers", "checkpoints", "response", "principal")
"""The fields of an event that are sealed; every other field stays in the clear (the principal,
who made the call, is the user's identity: sealed like what they sent)."""


def seal_event(event: dict[str, Any], keys: KeyRing, max_bytes: int) -> dict[str, Any]:
    """The event to store: its listing fields, ``sealed`` payload and ``truncated`` parts."""
    stored = {k: v for k, v in event.items() if k not in PAYLOAD}
    payload = {k: event[k] for k in PAYLOAD if k in event}
    try:
        packed = pack(payload)
    except (TypeError, ValueError, OverflowError) as exc:
        raise TypeError(f"journal event is not msgpack-serialisable ({exc})") from exc
    if len(packed) > max_bytes:
        truncated = _truncate(payload, max_bytes)
        stored["truncated"] = truncated
        packed = pack(payload)
    stored["v"] = VERSION
    stored["sealed"] = keys.seal_record(packed, PURPOSE)
    if keys.ephemeral:
        stored["ephemeral_key"] = True
    return stored


def _truncate(payload: dict[str, Any], max_bytes: int) -> dict[str, int]:
    """Drop the largest fields until the rest fits; the dropped ones, with their sizes."""
    sizes = {k: len(pack(v)) for k, v in payload.items()}
    dropped: dict[str, int] = {}
    total = sum(sizes.values())
    for name in sorted(sizes, key=sizes.__getitem__, reverse=True):
        if total <= max_bytes:
            break
        dropped[name] = sizes[name]
        total -= sizes[name]
        payload[name] = None
    return dropped


def is_sealed(event: dict[str, Any]) -> bool:
    return "sealed" in event


def open_event(event: dict[str, Any], keys: KeyRing) -> dict[str, Any]:
    """The event with its payload opened (``InvalidRequestState`` names why it does not
    open: ``unknown key``, ``seal``, ``malformed``)."""
    opened = {k: v for k, v in event.items() if k != "sealed"}
    sealed = event["sealed"]
    if not isinstance(sealed, bytes):
        raise InvalidRequestState("malformed")
    payload = msgpack.unpackb(keys.open_record(sealed, PURPOSE), raw=False, strict_map_key=False)
    if isinstance(payload, dict):
        opened.update((k, v) for k, v in payload.items() if k in PAYLOAD)
    return opened


__all__ = ["PAYLOAD", "PURPOSE", "is_sealed", "open_event", "seal_event"]
