"""The journal entry of one round: what was asked, answered, checkpointed and returned, by
which code on which replica.

What the handler takes of the arguments is recorded (when arguments are journaled at all),
without what it must never keep (``Redacted``) nor extra keys a client added. The response of
a round that asks for input is kept without its ``requestState``: the token seals what the
event records anyway (answers, checkpoints), and a journal keeps no live tokens.
"""

from __future__ import annotations

import time
from typing import Any

from engine.calls.reply import CallRequest, RoundReply
from engine.handlers.base import Handler

UNKEPT_TOKEN = b"(not journaled)"
"""What the journal keeps of a response's ``requestState``."""


def round_event(
    recorded: bool,
    replica_id: str,
    server: str,
    handler: Handler,
    request: CallRequest,
    reply: RoundReply,
    response: bytes,
    started: float,
) -> dict[str, Any]:
    """The event of one round; ``recorded``: whether arguments are journaled; ``server``: the
    server's name; ``started``: the round's ``perf_counter`` at its start."""
    trace = reply.trace
    signature = handler.signature
    redacted = signature.redacted
    arguments = request.arguments
    token = reply.request_state
    if token:
        response = _without_token(response, token)
    if recorded and isinstance(arguments, dict):
        # The model ignores extra keys a client added, and so does the journal.
        names = signature.argument_names
        arguments = {k: v for k, v in arguments.items() if k in names and k not in redacted}
    event = {
        "v": 1,
        "ts": time.time(),
        "kind": reply.kind.value,
        "target": handler.name,
        "method": request.method,
        "protocol": request.scope.protocol_version,
        "round": reply.round_no,
        "arguments": (arguments or {}) if recorded else None,
        "arguments_recorded": recorded,
        "questions": reply.input_requests
        or (dict(trace.asked_in_place) if trace is not None else {}),
        "answers": trace.accepted if trace is not None else {},
        "checkpoints": trace.new_checkpoints() if trace is not None else {},
        "response": response,
        "duration_ms": int((time.perf_counter() - started) * 1e6) / 1000,  # µs resolution
        "replica": replica_id,
        "server": server,
        "code": handler.code_fingerprint,
    }
    if redacted:
        event["redacted"] = sorted(redacted)
    if reply.input_requests and response.startswith(ASKED):
        # The response holds the questions as sent: the journal keeps them there only.
        event["asked_in_response"] = True
    return event


TOKEN_FIELD = b'"requestState":"'
ASKED = b'{"resultType":"input_required","inputRequests":'
"""How a response starts whose ``inputRequests`` are the round's ``input_requests`` as sent."""


def _without_token(response: bytes, token: str) -> bytes:
    """The response with its ``requestState`` replaced by `UNKEPT_TOKEN` (found by its field
    name, which is short to search for; the token itself, anywhere, otherwise)."""
    at = response.rfind(TOKEN_FIELD)
    if at >= 0:
        start = at + len(TOKEN_FIELD)
        sealed = token.encode()
        if response.startswith(sealed, start) and response.startswith(b'"', start + len(sealed)):
            return response[:start] + UNKEPT_TOKEN + response[start + len(sealed) :]
    return response.replace(token.encode(), UNKEPT_TOKEN)
