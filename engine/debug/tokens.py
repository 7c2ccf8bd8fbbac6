"""A requestState opened for people: its claims and the call state it carries, as plain data.

``python -m engine inspect`` prints this; tests and the docs read it through
:func:`engine.testing.inspect_request_state`. Opening needs the server's keys, as for a round.
"""

from __future__ import annotations

import base64
import time
from datetime import UTC, datetime
from typing import Any

from engine._internal.trace_field import carried_fields
from engine.debug.journal import jsonable
from engine.errors import InvalidRequestState
from engine.state.call import CallState
from engine.state.claims import Claims, StateRef
from engine.state.seal import PREFIX, KeyRing


def describe_request_state(
    ring: KeyRing, token: str, *, now: float | None = None
) -> dict[str, Any]:
    """``{"key_id", "claims", "state"}`` of ``token``, or ``"state_ref"`` in place of
    ``"state"`` when the state is kept in the store. Raises :class:`InvalidRequestState`
    (its ``reason`` says why) when the token does not open with ``ring``."""
    claims = Claims.decode(ring.open(token, max_chars=len(token) + 1))
    now = time.time() if now is None else now
    shown: dict[str, Any] = {
        "key_id": key_id(token),
        "claims": {
            "call_id": claims.call_id.hex(),
            "round": claims.round_no,
            "issued_at": _iso(claims.issued_at),
            "expires_at": _iso(claims.issued_at + claims.ttl),
            "ttl": claims.ttl,
            "expired": now >= claims.issued_at + claims.ttl,
            "binding": claims.binding.hex(),
            "binding_tags": claims.tags.hex(),
            "principal": claims.principal.hex() if claims.principal is not None else None,
        },
    }
    if claims.scopes:  # the scopes the call needs, checked again on each round
        shown["claims"]["scopes"] = list(claims.scopes)
    fields = carried_fields(claims.trace) if claims.trace is not None else None
    if fields is not None:  # the ids a trace backend finds the call's trace by
        trace_id, root_id, previous_id, flags = fields
        shown["claims"]["trace"] = {
            "trace_id": f"{trace_id:032x}",
            "root_span_id": f"{root_id:016x}",
            "round_span_id": f"{previous_id:016x}" if previous_id else None,
            "sampled": bool(flags),
        }
    if isinstance(claims.state, StateRef):
        shown["state_ref"] = {
            "blob_id": claims.state.blob_id,
            "sha256": claims.state.sha256.hex(),
        }
    else:
        shown["state"] = describe_state(claims.state)
    return shown


def describe_state(data: bytes) -> dict[str, Any]:
    """A call's state (inline in a token, or a blob from the store) as plain data."""
    try:
        state = CallState.decode(data)
    except InvalidRequestState as exc:
        return {"undecodable": exc.reason}
    described: dict[str, Any] = {
        "answers": {
            key: {"question_fingerprint": fp.hex(), "answer": jsonable(answer)}
            for key, (fp, answer) in state.answers.items()
        },
        "asked": {key: fp.hex() for key, fp in state.asked.items()},
        "checkpoints": jsonable(state.checkpoints),
    }
    handler = state.handler
    if handler is not None:
        described["handler_asked"] = dict(handler.methods)
        described["handler_request_state"] = handler.state
    return described


def key_id(token: str) -> str | None:
    """The id of the key a token names (hex), read without opening it; ``None`` when the
    token is not one."""
    if not token.startswith(PREFIX):
        return None
    body = token[len(PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except ValueError:
        return None
    return raw[:4].hex() if len(raw) >= 4 else None


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


__all__ = ["describe_request_state", "describe_state", "key_id"]
