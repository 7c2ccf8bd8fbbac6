"""A journal record as the store keeps it: what a listing needs in the clear, the rest sealed.

A record holds one or more rounds of one call (a call that ends soon after it starts is one
record; see `engine.store_services.journal_writer`). The store holds what a listing reads (when,
which target, how the call ended so far, which server) as it is, and an outline of each round
(`OUTLINE`: its number, kind, time, duration, replica, trace, a task run's hold), so a reader
without the keys still sees the call's timeline. The rest of the rounds (arguments, questions,
answers, checkpoints, responses, who made them, which code) is packed, compressed where that
pays and sealed with the server's key ring, so a store file or a Redis dump shows no user data.
A round over ``max_bytes`` loses its largest parts, each named under ``truncated`` with its
size, so a reader can say that the round cannot be replayed exactly instead of replaying
something else.

Records of version 2 (one round each, the listing fields of the round in the clear, its payload
sealed uncompressed) still open: `open_rounds` reads both.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

import msgpack

from engine.errors import InvalidRequestState
from engine.state.seal import KeyRing
from stores.packing import pack

PURPOSE = b"engine/journal/v3"
"""Bound to every sealed record: it opens as a journal record and as nothing else."""
VERSION = 3
PURPOSE_V2 = b"engine/journal/v2"
"""What version 2 payloads were sealed for (one round each)."""
PAYLOAD = ("arguments", "questions", "answers", "checkpoints", "response", "principal")
"""The user's data in a round: what the cap on a round's size cuts first, largest first."""
LISTING = ("ts", "target", "kind", "server")
"""The fields a record keeps in the clear, of its last round (``server`` and ``target``: the
same in each, so its rounds are sealed without them)."""
OUTLINE = ("round", "kind", "ts", "duration_ms", "replica", "task", "trace_id", "hold", "takeovers")
"""What a record keeps of each round in the clear, under ``outline``: what a reader without the
keys still sees of a call (its timeline: which replica served each round, when, how long, how it
ended; its trace; a task run's hold and takeovers). The rest of a round is sealed."""

RAW = b"\x00"
DEFLATED = b"\x01"
"""The first byte of a record's plaintext: its rounds packed as they are, or deflated with
`DICTIONARY` (a record only says so when that came out smaller)."""
MAX_OPENED_BYTES = 64 * 1024 * 1024
"""A record that inflates past this is refused as malformed."""

DICTIONARY = b"".join(
    pack(key)
    for key in (
        "ts",
        "kind",
        "target",
        "method",
        "tools/call",
        "protocol",
        "round",
        "arguments",
        "arguments_recorded",
        "questions",
        "answers",
        "checkpoints",
        "response",
        "duration_ms",
        "replica",
        "code",
        "redacted",
        "principal",
        "task",
        "complete",
        "input_required",
        "action",
        "accept",
        "decline",
        "content",
        "elicitation/create",
        "sampling/createMessage",
        "roots/list",
        "params",
        "mode",
        "form",
        "message",
        "requestedSchema",
    )
) + (
    b'"type":"string"},"type":"integer"},"type":"number"},"type":"boolean"},"description":"'
    b'"title":"{"method":"elicitation/create","params":{"mode":"form","message":"'
    b'"requestedSchema":{"properties":{"required":["],"type":"object"}}'
    b'{"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":'
    b'{"resultType":"input_required","inputRequests":{"'
    b'"requestState":"s1.'
    b'"isError":true,"resultType":"complete","_meta":{"io.modelcontextprotocol/'
    b'{"content":[{"type":"text","text":"'
    b'"}],"structuredContent":{"result":"'
    b'"},"isError":false,"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo"'
    b':{"name":"'
)
"""Deflate's preset dictionary: what rounds of every server share (field names, the shapes of
MCP results and input requests), so a record of a kilobyte need not spell them out. Records
name no dictionary: changing it needs a new `RAW`/`DEFLATED` byte for the new one."""

_PRIMED = zlib.compressobj(2, zlib.DEFLATED, -12, 4, zlib.Z_FIXED, DICTIONARY)
"""A compressor that has read `DICTIONARY`, copied for each record rather than made anew (which
would hash the dictionary and clear its tables every time). A fast level, a 4 KiB window, small
tables and deflate's fixed codes (no code tables to build and send for each record): a record of
a kilobyte or two needs no more, and compresses about as well (inflating takes any window and
either kind of codes, so the format does not change)."""

IN_RESPONSE = True
"""A round's ``questions`` when they are the ``inputRequests`` of its response."""


def seal_rounds(events: list[dict[str, Any]], keys: KeyRing, max_bytes: int) -> dict[str, Any]:
    """The record to store of a call's rounds (in order, one call's, at least one)."""
    last = events[-1]
    stored: dict[str, Any] = {"v": VERSION}
    for name in LISTING:
        value = last.get(name)
        if value is not None:
            stored[name] = value
    target = stored.get("target")
    outline = []
    rounds = []
    for event in events:
        outline.append({k: event[k] for k in OUTLINE if k in event})
        kept = event.copy()  # then the few names in the clear dropped: fewer steps than a
        for name in _UNSEALED:  # comprehension over every field, the order of the rest kept
            kept.pop(name, None)
        if "target" in kept and kept["target"] == target:
            del kept["target"]
        if "principal" in event:
            stored["has_principal"] = True  # in the clear: a listing says it is sealed
        if event.get("asked_in_response"):  # its questions: the response's inputRequests
            kept["questions"] = IN_RESPONSE
        rounds.append(kept)
    stored["outline"] = outline
    packed = _packed(rounds)
    if len(packed) > max_bytes:  # within it, no round's payload can be over it
        for kept, event in zip(rounds, events, strict=True):
            if kept.get("questions") is IN_RESPONSE:  # the cap may cut the response
                kept["questions"] = event["questions"]
        packed = _packed([_capped(kept, max_bytes) for kept in rounds])
    squeezer = _PRIMED.copy()
    deflated = squeezer.compress(packed) + squeezer.flush()
    plaintext = DEFLATED + deflated if len(deflated) < len(packed) else RAW + packed
    stored["sealed"] = keys.seal_record(plaintext, PURPOSE)
    if keys.ephemeral:
        stored["ephemeral_key"] = True
    return stored


_SHARED = ("server", "target", "has_principal")
"""A record's fields in the clear that each of its rounds has."""
_UNSEALED = (*OUTLINE, "v", "server", "has_principal", "asked_in_response")


def _packed(value: Any) -> bytes:
    try:
        return pack(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise TypeError(f"journal event is not msgpack-serialisable ({exc})") from exc


def _capped(event: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """The round, its largest payload parts dropped (and named) while it is over ``max_bytes``."""
    payload = {k: event[k] for k in PAYLOAD if k in event}
    try:
        size = len(pack(payload))
    except (TypeError, ValueError, OverflowError) as exc:
        raise TypeError(f"journal event is not msgpack-serialisable ({exc})") from exc
    if size <= max_bytes:
        return event
    sizes = {k: len(pack(v)) for k, v in payload.items()}
    dropped: dict[str, int] = {}
    total = sum(sizes.values())
    for name in sorted(sizes, key=sizes.__getitem__, reverse=True):
        if total <= max_bytes:
            break
        dropped[name] = sizes[name]
        total -= sizes[name]
    return {**event, **dict.fromkeys(dropped), "truncated": dropped}


def is_sealed(event: dict[str, Any]) -> bool:
    return "sealed" in event


def rounds_in(record: dict[str, Any]) -> int:
    """How many rounds a stored record holds (read in the clear)."""
    outline = record.get("outline")
    return len(outline) if isinstance(outline, list) and outline else 1


def outline_of(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The rounds of a stored record as its clear part tells them (no keys needed): each with
    the record's listing fields and its own outline, none of its sealed fields."""
    if record.get("v") != VERSION:
        return [{k: v for k, v in record.items() if k != "sealed"}]
    outline = record.get("outline")
    if not isinstance(outline, list) or not all(isinstance(o, dict) for o in outline):
        raise InvalidRequestState("malformed")
    shared: dict[str, Any] = {k: record[k] for k in _SHARED if k in record}
    return [{**shared, **o} for o in outline]


def open_rounds(record: dict[str, Any], keys: KeyRing) -> list[dict[str, Any]]:
    """The rounds of a stored record, opened (``InvalidRequestState`` names why it does not
    open: ``unknown key``, ``seal``, ``malformed``); a record never sealed is one round as is."""
    if not is_sealed(record):
        return [record]
    if record.get("v") != VERSION:
        return [_open_v2(record, keys)]
    clear = outline_of(record)
    sealed = record["sealed"]
    if not isinstance(sealed, bytes):
        raise InvalidRequestState("malformed")
    plaintext = keys.open_record(sealed, PURPOSE)
    body = plaintext[1:]
    if plaintext[:1] == DEFLATED:
        inflater = zlib.decompressobj(-15, DICTIONARY)
        try:
            body = inflater.decompress(body, MAX_OPENED_BYTES)
        except zlib.error:
            raise InvalidRequestState("malformed") from None
        if inflater.unconsumed_tail:
            raise InvalidRequestState("malformed")
    elif plaintext[:1] != RAW:
        raise InvalidRequestState("malformed")
    try:
        rounds = msgpack.unpackb(body, raw=False, strict_map_key=False)
    except (ValueError, msgpack.UnpackException):
        raise InvalidRequestState("malformed") from None
    if (
        not isinstance(rounds, list)
        or len(rounds) != len(clear)
        or not all(isinstance(r, dict) for r in rounds)
    ):
        raise InvalidRequestState("malformed")
    opened = [{**c, **r} for c, r in zip(clear, rounds, strict=True)]
    for event in opened:
        if event.get("questions") is IN_RESPONSE:
            event["questions"] = _asked(event.get("response"))
    return opened


def _asked(response: Any) -> Any:
    """The questions a response asked (its ``inputRequests``)."""
    if not isinstance(response, bytes):
        raise InvalidRequestState("malformed")
    try:
        asked = json.loads(response)["inputRequests"]
    except (ValueError, KeyError, TypeError):
        raise InvalidRequestState("malformed") from None
    return asked


def _open_v2(event: dict[str, Any], keys: KeyRing) -> dict[str, Any]:
    """A version 2 record: one round, its listing fields in the clear, its payload sealed."""
    opened = {k: v for k, v in event.items() if k != "sealed"}
    sealed = event["sealed"]
    if not isinstance(sealed, bytes):
        raise InvalidRequestState("malformed")
    payload = msgpack.unpackb(keys.open_record(sealed, PURPOSE_V2), raw=False, strict_map_key=False)
    if isinstance(payload, dict):
        opened.update((k, v) for k, v in payload.items() if k in PAYLOAD)
    return opened


__all__ = [
    "OUTLINE",
    "PAYLOAD",
    "PURPOSE",
    "is_sealed",
    "open_rounds",
    "outline_of",
    "rounds_in",
    "seal_rounds",
]
