"""What a requestState is bound to, checked every time it comes back.

A token opens only for the audience, method, target, argument digest and principal it was minted
for, only before it expires, and only if it was not minted in the future. Every check failure is
the one frozen wire error; the reason goes to the log.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

import msgpack
from pydantic_core import to_json

from engine._internal.random_pool import random_bytes
from engine.errors import InvalidRequestState
from stores.packing import pack

CLAIMS_VERSION = 1
TRACED_CLAIMS_VERSION = 2
"""Claims that carry a trace context: one field more. A token without one keeps version 1,
byte for byte as before, so replicas of an earlier release open it during a rolling deploy."""
SCOPED_CLAIMS_VERSION = 3
"""Claims of a call that needs scopes: a trace field (``None`` when untraced) and the scopes,
space-separated. Only such a call's tokens have it; every other keeps its version."""
MAX_TRACE_BYTES = 64
CLOCK_SKEW = 120.0
"""Seconds a token may seem minted in the future, or past its expiry, by the clock of the
replica checking it (the default of ``clock_skew``): a replica 90 s off still opens the others'
tokens."""
CALL_ID_TIME_BYTES = 6
CALL_ID_RANDOM_BYTES = 16
CALL_ID_BYTES = CALL_ID_TIME_BYTES + CALL_ID_RANDOM_BYTES


class Binding:
    """The request a token belongs to.

    Its digest and tags are computed together the first time either is needed: a call that
    finishes in its first round never needs them.
    """

    __slots__ = ("_parts", "arguments", "audience", "method", "target")

    def __init__(self, audience: str, method: str, target: str, arguments: Any) -> None:
        self.audience = audience
        self.method = method
        self.target = target
        self.arguments = arguments
        self._parts: tuple[bytes, bytes] | None = None

    def digest(self) -> bytes:
        parts = self._parts
        return (parts if parts is not None else self._compute())[0]

    def tags(self) -> bytes:
        """One byte per bound part, to say which one differs when the binding does not match."""
        parts = self._parts
        return (parts if parts is not None else self._compute())[1]

    def _compute(self) -> tuple[bytes, bytes]:
        started, tags = _target(self.audience, self.method, self.target)
        arguments = args_digest(self.arguments)
        h = started.copy()
        h.update(arguments)
        parts = self._parts = (h.digest()[:16], tags + arguments[:1])
        return parts


@functools.lru_cache(maxsize=1024)
def _target(audience: str, method: str, target: str) -> tuple[Any, bytes]:
    """The binding hash over everything but the arguments, and the audience and target tags:
    computed once per target."""
    h = hashlib.sha256(b"engine/binding\0")
    h.update(audience.encode("utf-8", "surrogatepass") + b"\0")
    h.update(method.encode() + b"\0")
    h.update(target.encode("utf-8", "surrogatepass") + b"\0")
    aud = hashlib.sha256(audience.encode("utf-8", "surrogatepass")).digest()[0]
    tgt = hashlib.sha256((method + "\0" + target).encode("utf-8", "surrogatepass")).digest()[0]
    return h, bytes((aud, tgt))


_NESTED = (dict, list)


def sorted_keys(value: Any) -> Any:
    """``value`` with every object's keys in sorted order, lists as they are: the one form of
    equal JSON values, whatever order their keys came in, to hash (recursing only into
    containers: answers are small trees of mostly leaves)."""
    if isinstance(value, dict):
        result = {}
        for key in sorted(value) if len(value) > 1 else value:
            item = value[key]
            result[key] = sorted_keys(item) if isinstance(item, _NESTED) else item
        return result
    if isinstance(value, list):
        return [sorted_keys(v) if isinstance(v, _NESTED) else v for v in value]
    return value


def args_digest(arguments: Any) -> bytes:
    """SHA-256 of the canonical JSON (sorted keys) of the raw wire arguments."""
    if not arguments:
        value: Any = {} if arguments is None else arguments
    elif isinstance(arguments, dict):
        for item in arguments.values():
            if isinstance(item, _NESTED):
                value = sorted_keys(arguments)
                break
        else:  # flat arguments, the common case
            value = arguments if len(arguments) == 1 else dict(sorted(arguments.items()))
    else:
        value = sorted_keys(arguments)
    try:
        canonical = to_json(value, fallback=str)
    except ValueError:  # lone surrogates: only reachable from in-process callers
        canonical = json.dumps(value, ensure_ascii=True, default=str).encode()
    return hashlib.sha256(canonical).digest()


def principal_tag(principal: str, salt: bytes | None = None) -> bytes:
    salt = salt if salt is not None else random_bytes(4)
    digest = hashlib.sha256(
        b"engine/principal\0" + salt + principal.encode("utf-8", "surrogatepass")
    ).digest()
    return salt + digest[:16]


def new_call_id() -> bytes:
    """The call's creation time (Unix milliseconds, big-endian, as in a UUIDv7) then 128 random
    bits. Calls begun together sort together, so the rows a store keys by call id (rounds, the
    journal, listings) land on the same few pages of an index instead of one page each; the random
    part keeps the id, which is also a task's handle, as hard to guess as a random one."""
    millis = time.time_ns() // 1_000_000
    return millis.to_bytes(CALL_ID_TIME_BYTES, "big") + random_bytes(CALL_ID_RANDOM_BYTES)


@dataclass(frozen=True, slots=True)
class StateRef:
    """State kept in the store: its blob id and the SHA-256 the blob must have."""

    blob_id: str
    sha256: bytes


@dataclass(slots=True)
class Claims:
    """Everything sealed in a token.

    Not frozen, though never changed: a frozen dataclass is slower to build (each field set
    through ``object.__setattr__``), and one is built on every round.
    """

    issued_at: int
    ttl: int
    binding: bytes
    tags: bytes
    principal: bytes | None
    call_id: bytes
    round_no: int
    state: bytes | StateRef
    trace: bytes | None = None
    """The call's trace context, when the round that minted the token was traced (see
    ``engine._internal.trace_field.CARRIED_BYTES``): opaque here."""
    scopes: tuple[str, ...] = ()
    """The OAuth scopes the call needs (its handler's ``scopes=``): the token of the request
    that brings this requestState back must have them."""

    def encode(self) -> bytes:
        state: Any = (
            [self.state.blob_id, self.state.sha256]
            if isinstance(self.state, StateRef)
            else self.state
        )
        fields = [
            CLAIMS_VERSION,
            self.issued_at,
            self.ttl,
            self.binding,
            self.tags,
            self.principal,
            self.call_id,
            self.round_no,
            state,
        ]
        if self.scopes:
            fields[0] = SCOPED_CLAIMS_VERSION
            fields.append(self.trace)
            fields.append(" ".join(self.scopes))
        elif self.trace is not None:
            fields[0] = TRACED_CLAIMS_VERSION
            fields.append(self.trace)
        return pack(fields)

    @classmethod
    def decode(cls, data: bytes) -> Claims:
        try:
            raw = msgpack.unpackb(
                data,
                raw=False,
                max_str_len=len(data),
                max_bin_len=len(data),
                max_array_len=16,
                max_map_len=0,
                max_ext_len=0,
            )
            version, iat, ttl, binding, tags, principal, call_id, round_no, state, *rest = raw
        except (ValueError, TypeError, msgpack.UnpackException, RecursionError):
            raise InvalidRequestState("claims") from None
        trace = None
        scopes: tuple[str, ...] = ()
        if version == TRACED_CLAIMS_VERSION and len(rest) == 1:
            trace = rest[0]
        elif version == SCOPED_CLAIMS_VERSION and len(rest) == 2:
            trace, named = rest
            if not isinstance(named, str) or not named:
                raise InvalidRequestState("claims")
            scopes = tuple(named.split(" "))
        elif version != CLAIMS_VERSION:
            raise InvalidRequestState("claims version")
        elif rest:
            raise InvalidRequestState("claims")
        ok = (
            (trace is None or (isinstance(trace, bytes) and len(trace) <= MAX_TRACE_BYTES))
            and isinstance(iat, int)
            and isinstance(ttl, int)
            and isinstance(binding, bytes)
            and isinstance(tags, bytes)
            and (principal is None or isinstance(principal, bytes))
            and isinstance(call_id, bytes)
            and isinstance(round_no, int)
        )
        if isinstance(state, list):
            if len(state) != 2 or not isinstance(state[0], str) or not isinstance(state[1], bytes):
                ok = False
            else:
                state = StateRef(state[0], state[1])
        elif not isinstance(state, bytes):
            ok = False
        if not ok:
            raise InvalidRequestState("claims")
        return cls(iat, ttl, binding, tags, principal, call_id, round_no, state, trace, scopes)

    def verify(
        self,
        binding: Binding,
        principal: str | None,
        now: float | None = None,
        skew: float = CLOCK_SKEW,
    ) -> None:
        """Raise the frozen error, with the precise reason for the log, unless all checks pass.
        ``skew``: seconds the minting replica's clock may be off from this one's, either way."""
        now = time.time() if now is None else now
        if self.issued_at > now + skew:
            raise InvalidRequestState("minted in the future")
        if now >= self.issued_at + self.ttl + skew:
            raise InvalidRequestState("expired")
        if self.binding != binding.digest():
            live = binding.tags()
            parts = ("audience", "target", "arguments")
            reasons = [p for p, a, b in zip(parts, self.tags, live, strict=False) if a != b]
            raise InvalidRequestState("request binding: " + (", ".join(reasons) or "mismatch"))
        if (self.principal is None) != (principal is None):
            raise InvalidRequestState("principal drift")
        if (
            self.principal is not None
            and principal is not None
            and principal_tag(principal, self.principal[:4]) != self.principal
        ):
            raise InvalidRequestState("principal")
