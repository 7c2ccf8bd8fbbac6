"""What the protocol layer hands a round (:class:`CallRequest`) and gets back from it
(:class:`RoundReply`)."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from engine.questions.answers import AnswerSource
from engine.scope import RequestScope
from engine.state.call import CallState, HandlerRequests

Finisher = Callable[["RoundReply", bytes], Awaitable[None] | None]
"""Keeps a round's response and journals it; ``None`` when nothing is left to wait for."""


@dataclass(slots=True)
class CallRequest:
    """A ``tools/call``, ``prompts/get`` or ``resources/read`` as the round runner sees it."""

    method: str
    target: str
    arguments: Any
    input_responses: Any
    request_state: Any
    scope: RequestScope
    forwarded: HandlerRequests | None = None
    """For a direct call made with a handler's Context: the input requests that handler
    returned last round (forwarding what this call returned then), so this call's handler
    reads the answers in ``input_responses`` as its own."""


class ReplyKind(enum.StrEnum):
    COMPLETE = "complete"
    """``value`` is the wire result."""
    INPUT_REQUIRED = "input_required"
    """``input_requests`` to answer (none when a duplicate must retry) and ``request_state``;
    ``value``, when the handler returned its own requests, is what it returned."""
    ERROR = "error"
    """``error`` is the text of a tool's error result."""
    CACHED = "cached"
    """``cached`` is the serialised result of an earlier attempt of the same round."""
    TASK = "task"
    """``value`` is the task handle (``CreateTaskResult``); the body runs in the background."""


@dataclass(slots=True)
class RoundReply:
    """What a round produced. :meth:`finish` must be called with the serialised result (and
    what it returns awaited): it keeps the response for duplicates and journals the round."""

    kind: ReplyKind
    value: Any = None
    call_id: str | None = None
    round_no: int = 1
    input_requests: dict[str, Any] | None = None
    request_state: str | None = None
    error: str | None = None
    cached: bytes | None = None
    finisher: Finisher | None = None
    """Keeps the response and journals the round, when there is a store. It is given the
    reply rather than holding it: a reply and a closure over it would form a reference cycle,
    and every round would leave its whole request for the garbage collector."""
    trace: AnswerSource | None = None
    """The round's answer source: what it asked in place, accepted and recorded, for the
    journal."""
    launch: Callable[[], None] | None = None
    """Starts a task's body, once the round that created the task is kept and journaled."""
    exception: BaseException | None = None
    """What a handler raised unexpectedly, for an ``error`` reply (recorded on its span)."""
    cause: BaseException | None = None
    """What a failure the handler meant was raised from, for an ``error`` reply (a direct call
    chains to it)."""

    def finish(self, response: bytes) -> Awaitable[None] | None:
        """Keep and journal the round; an awaitable when that must wait for the store."""
        finisher = self.finisher
        return None if finisher is None else finisher(self, response)


class TaskStart(Protocol):
    """How a round leaves its body to a task (``engine.tasks``): whether the call becomes one
    once its resolvers are answered, and the reply that starts it."""

    async def wanted(self, arguments: dict[str, Any]) -> bool: ...

    async def start(
        self,
        request: CallRequest,
        call_id: bytes,
        round_no: int,
        state: CallState,
        principal: str | None,
    ) -> RoundReply: ...


__all__ = ["CallRequest", "Finisher", "ReplyKind", "RoundReply", "TaskStart"]
