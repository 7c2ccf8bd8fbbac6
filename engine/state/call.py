"""The progress of one call between rounds, and its msgpack codec.

A call's state is everything a replica needs to resume it: the answers recorded so far (each
pinned to the fingerprint of the question it answered), the fingerprints of the questions that
are out with the client now, checkpoint values (``once=True`` resolvers and ``ctx.once``), and,
when the handler asked the client for input itself, what it asked and the string it keeps for
its next round.
Decoding happens only after the seal verified, and with explicit limits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgpack

from engine.errors import InvalidRequestState
from stores.packing import pack

STATE_VERSION = 1
MAX_STATE_BYTES = 64 * 1024 * 1024


@dataclass(slots=True)
class HandlerRequests:
    """What a handler asked the client for by returning ``input_required`` itself: the method
    of each of its requests, by key, and the ``request_state`` string it chose."""

    methods: dict[str, str]
    state: str | None = None


@dataclass(slots=True)
class CallState:
    """What a call carries from one round to the next."""

    answers: dict[str, tuple[bytes, Any]] = field(default_factory=dict)
    """Recorded answers: wire key → (question fingerprint, the answer as received)."""
    asked: dict[str, bytes] = field(default_factory=dict)
    """Questions sent in the last round: wire key → fingerprint."""
    checkpoints: dict[str, Any] = field(default_factory=dict)
    """Values of ``once`` steps: key → JSON-compatible value."""
    handler: HandlerRequests | None = None
    """What the handler asked for itself in the last round (``None``: it asked nothing)."""

    def encode(self) -> bytes:
        answers = {k: [fp, a] for k, (fp, a) in self.answers.items()}
        fields: list[Any] = [STATE_VERSION, answers, self.asked, self.checkpoints]
        handler = self.handler
        if handler is not None:  # appended only then: every other state keeps its bytes
            fields.append([handler.methods, handler.state])
        return pack(fields)

    @classmethod
    def decode(cls, data: bytes) -> CallState:
        if len(data) > MAX_STATE_BYTES:
            raise InvalidRequestState("state too large")
        try:
            raw = msgpack.unpackb(
                data,
                raw=False,
                strict_map_key=True,
                max_str_len=len(data),
                max_bin_len=len(data),
                max_array_len=len(data),
                max_map_len=len(data),
                max_ext_len=0,
            )
        except (ValueError, TypeError, msgpack.UnpackException, RecursionError) as exc:
            raise InvalidRequestState(f"state: {type(exc).__name__}") from None
        if not isinstance(raw, list) or len(raw) not in (4, 5) or raw[0] != STATE_VERSION:
            raise InvalidRequestState("state version")
        _, answers, asked, checkpoints, *rest = raw
        if not (isinstance(answers, dict) and isinstance(asked, dict)):
            raise InvalidRequestState("state shape")
        if not isinstance(checkpoints, dict):
            raise InvalidRequestState("state shape")
        state = cls(checkpoints=checkpoints)
        if rest:
            state.handler = _handler_requests(rest[0])
        for key, entry in answers.items():
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], bytes)):
                raise InvalidRequestState("state shape")
            state.answers[key] = (entry[0], entry[1])
        for key, fp in asked.items():
            if not isinstance(fp, bytes):
                raise InvalidRequestState("state shape")
            state.asked[key] = fp
        return state


def _handler_requests(raw: Any) -> HandlerRequests:
    if not (isinstance(raw, list) and len(raw) == 2 and isinstance(raw[0], dict)):
        raise InvalidRequestState("state shape")
    methods, kept = raw
    if not all(type(method) is str for method in methods.values()):
        raise InvalidRequestState("state shape")
    if kept is not None and not isinstance(kept, str):
        raise InvalidRequestState("state shape")
    return HandlerRequests(methods, kept)
