"""``execute_round``: one round of one handler, the same code for live calls and for replay.

It checks the arguments, walks the resolver plan, runs the body and turns its value into the
wire result, with the call's state and an answer source given to it. It knows nothing of
tokens, stores or transports: a live round (:mod:`engine.calls.runner`) opens the token and
claims the round around it, a replayed one (:mod:`engine.debug.replay`) feeds it the journal.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.calls.arguments import InvalidArguments, validate_arguments
from engine.calls.handler_requests import handed_answers, keep_requests
from engine.calls.walk import DEFERRED, SUSPENDED, BeforeBody, Round
from engine.di.overrides import DependencyOverrides
from engine.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    TEMPLATE_FAILED,
    MCPError,
    ResourceError,
    ToolError,
    protocol_error_of,
)
from engine.handlers.base import Handler
from engine.input_requests import NEVER_ASKS, input_required_of
from engine.questions.answers import AnswerSource
from engine.role import Role
from engine.scope import CallScope, RequestScope, ServerHooks
from engine.state.call import CallState

log = logging.getLogger("engine.calls")

Convert = Callable[[Any], Any]
"""Turns a body's value into its method's wire result (``Tool.result``, say)."""


class Outcome(enum.Enum):
    COMPLETE = "complete"
    """The body ran: ``value`` is the wire result."""
    SUSPENDED = "suspended"
    """Questions are pending: the answer source holds them."""
    FAILED = "failed"
    """``error`` says why, in the words the client gets."""
    DEFERRED = "deferred"
    """The resolvers are answered and the body is left to run later, as a task."""
    HANDLER_ASKED = "handler_asked"
    """The body returned input requests of its own: ``value`` is their wire form, and the
    answer source's next state records them."""


@dataclass(slots=True)
class Executed:
    """What one round of a handler came to."""

    outcome: Outcome
    value: Any = None
    error: str | None = None
    unexpected: BaseException | None = None
    """The exception behind an "unexpected error", for the log (live) or the report (replay)."""
    code: int = INTERNAL_ERROR
    """The JSON-RPC code of a failed prompt or resource (a tool's failure is a result)."""
    cause: BaseException | None = None
    """What a failure the handler meant was raised from: its ``ToolError``, or the
    ``ValidationError`` of arguments that do not fit (a direct call chains to it)."""
    returned: Any = None
    """The input requests as the handler returned them (``HANDLER_ASKED``): a direct call
    hands them back unchanged."""


VERBS = {
    Role.TOOL: "Error executing tool",
    Role.PROMPT: "Error getting prompt",
    Role.RESOURCE: "Error reading resource",
}


def failed(handler: Handler, target: str, exc: ToolError) -> Executed:
    """A failure the handler meant: its own words reach the client, after the handler's name
    (a resource's words alone, as its URI travels in the error's data)."""
    code = exc.code if isinstance(exc, ResourceError) else INTERNAL_ERROR
    if handler.role is Role.RESOURCE:
        return Executed(Outcome.FAILED, error=str(exc), code=code, cause=exc)
    text = f"{VERBS[handler.role]} {target}: {exc}"
    return Executed(Outcome.FAILED, error=text, code=code, cause=exc)


def crashed(handler: Handler, target: str, exc: Exception) -> Executed:
    """A failure the handler did not mean: the client learns which handler failed, never the
    exception's text (it stays in the server log)."""
    if handler.role is Role.RESOURCE and getattr(handler, "is_template", False):
        text = f"{TEMPLATE_FAILED} {target}"
    else:
        text = f"{VERBS[handler.role]} {target}"
    return Executed(Outcome.FAILED, error=text, unexpected=exc)


def fails_as_protocol_error(handler: Handler) -> bool:
    """A tool's failure is an error *result*; a prompt's or resource's is a protocol error."""
    return handler.role is not Role.TOOL


async def execute_round(
    handler: Handler,
    raw_arguments: Any,
    scope: RequestScope,
    call_id: str,
    round_no: int,
    state: CallState,
    answers: AnswerSource,
    *,
    hooks: ServerHooks,
    overrides: DependencyOverrides,
    convert: Convert | None,
    before_body: BeforeBody | None = None,
    target: str | None = None,
    input_responses: Any = None,
) -> Executed:
    """Run one round. Protocol errors propagate as :class:`MCPError` (another SDK's error of
    that shape becomes one, with its code, message and data); every other failure is an
    :attr:`Outcome.FAILED` with the text the client gets.

    ``convert`` runs inside the same guard as the body, so a value that cannot be sent fails
    like the body did. ``before_body``, once the resolvers are answered, may leave the body for
    later (:attr:`Outcome.DEFERRED`). ``target`` is what the request named (a resource's URI);
    the handler's name by default.
    ``input_responses`` are the client's answers as sent: a handler that asked for input
    itself last round reads its own from them (``ctx.input_responses``).
    """
    signature = handler.planned(overrides, overrides.version)
    try:
        arguments = validate_arguments(signature, raw_arguments)
    except InvalidArguments as exc:
        return Executed(Outcome.FAILED, error=str(exc), code=INVALID_PARAMS, cause=exc.__cause__)
    call = CallScope(handler.name, answers, state, answers.next_state, round_no)
    call.call_id = call_id
    handler_asked = state.handler
    if handler_asked is not None:
        call.request_state = handler_asked.state
        call.input_responses = handed_answers(
            handler_asked, input_responses, signature.answer_models, answers.accepted
        )
    try:
        value = await Round(signature, hooks, scope, call, answers, before_body).run(arguments)
        if value is SUSPENDED:
            return Executed(Outcome.SUSPENDED)
        if value is DEFERRED:
            return Executed(Outcome.DEFERRED)
        asked = None if type(value) in NEVER_ASKS else input_required_of(value)
        if asked is not None:
            requests = keep_requests(asked, signature, answers.next_state)
            return Executed(Outcome.HANDLER_ASKED, requests, returned=value)
        if convert is not None:
            value = convert(value)
    except MCPError:
        raise
    except ToolError as exc:
        return failed(handler, target or handler.name, exc)
    except Exception as exc:
        error = protocol_error_of(exc)
        if error is not None:
            raise error from exc
        return crashed(handler, target or handler.name, exc)
    return Executed(Outcome.COMPLETE, value)


__all__ = ["Executed", "Outcome", "execute_round", "fails_as_protocol_error"]
