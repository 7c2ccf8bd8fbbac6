"""A round under its span: entered once its token checked out (so the call's trace is known),
left when its code is done, ended once its response is kept and journaled.

The span's outcome is the reply's kind; the questions it asked are named by the trace label of
their kind only (``elicit``, ``sample``, ``roots``), never by what they say.
"""

from __future__ import annotations

from collections.abc import Awaitable, Coroutine
from typing import Any

from engine._internal.tracing import RequestTrace, RoundTrace
from engine.calls.reply import Finisher, RoundReply
from engine.handlers.base import Handler
from engine.questions.kinds import trace_labels


async def traced_round(
    trace: RequestTrace,
    handler: Handler,
    call_id: bytes,
    round_no: int,
    carried: bytes | None,
    rounds: Coroutine[Any, Any, RoundReply],
) -> RoundReply:
    """``rounds`` awaited with the round's span current; ``carried`` is the trace context its
    token brought."""
    try:
        span = trace.enter_round(handler.name, handler.role.value, call_id, round_no, carried)
    except BaseException:
        rounds.close()
        raise
    if not span.recording:  # left out of the trace: only its context is carried on
        try:
            return await rounds
        finally:
            span.leave()
    try:
        reply = await rounds
    except BaseException as exc:
        span.failed(exc)
        raise
    span.leave()
    questions = reply.input_requests
    if not questions and reply.trace is not None:
        questions = dict(reply.trace.asked_in_place)
    span.answered(reply.kind.value, trace_labels(questions or {}), reply.exception)
    finisher = reply.finisher
    if finisher is None:
        span.end()
    else:
        reply.finisher = _ending(span, finisher)
    return reply


def _ending(span: RoundTrace, finisher: Finisher) -> Finisher:
    """``finisher`` run with the round's span current again (its store operations are the
    round's), the span ended once it is done."""

    def finish(reply: RoundReply, response: bytes) -> Awaitable[None] | None:
        with span.resume():
            pending = finisher(reply, response)
        if pending is None:
            span.end()
            return None
        return _kept(span, pending)

    return finish


async def _kept(span: RoundTrace, pending: Awaitable[None]) -> None:
    with span.resume():
        try:
            await pending
        except BaseException as exc:
            span.failed(exc)
            raise
    span.end()
