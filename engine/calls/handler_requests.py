"""Input a handler asks the client for itself, by returning an ``InputRequiredResult``.

The returned value is recognised (ours, a dict of its wire form, or another library's model of
its shape), checked against the rest of the call, and kept in the call's next state: the method
of each request and the handler's own ``request_state`` string, which are sealed into the
server's ``requestState`` like everything else the call carries. On the retry the handler gets
that string back as ``ctx.request_state`` and the client's answers as ``ctx.input_responses``:
only answers to requests it made, each as the model of what was asked.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from engine._internal.typecache import REMEMBERED_TYPES
from engine.di.input_required import AnswerModels, is_input_required_model
from engine.di.signature import Signature
from engine.state.call import CallState, HandlerRequests
from engine.types import InputRequiredResult, wire_of

log = logging.getLogger("engine.rounds")

ONE_CHANNEL = (
    "a call asks the client through one channel: let the resolvers and ctx.elicit / ctx.sample "
    "/ ctx.list_roots ask, or return the handler's own input requests, not both"
)


_KINDS: dict[type, bool] = {}
"""Whether a value of each exact type may be input requests: one lookup per returned value."""


def input_required_of(value: Any) -> InputRequiredResult | None:
    """The input requests a handler returned instead of its value; ``None`` for any other value.

    A dict counts only with ``"resultType": "input_required"``: a dict without it is a tool's
    structured result."""
    kind = type(value)
    may_be = _KINDS.get(kind)
    if may_be is None:
        may_be = kind is dict or is_input_required_model(kind)
        if len(_KINDS) >= REMEMBERED_TYPES:
            _KINDS.clear()
        _KINDS[kind] = may_be
    if not may_be or (kind is dict and value.get("resultType") != "input_required"):
        return None
    wire = wire_of(value)
    wire.pop("resultType", None)
    return InputRequiredResult.model_validate(wire)


def keep_requests(
    asked: InputRequiredResult, signature: Signature, next_state: CallState
) -> dict[str, Any]:
    """The wire form of the requests the handler returned, recorded in ``next_state``.

    Raises ``RuntimeError`` when the call also asks through the engine (resolvers, or questions
    from the body answered earlier): that is a mistake in the handler, not the client's."""
    if signature.plan.nodes:
        raise RuntimeError(
            f"{signature.role} {signature.owner!r} returned an InputRequiredResult but has "
            f"Resolve(...) parameters; {ONE_CHANNEL}"
        )
    if next_state.answers:
        raise RuntimeError(
            f"{signature.role} {signature.owner!r} returned an InputRequiredResult in a call "
            f"that asked through ctx ({', '.join(sorted(next_state.answers))}); {ONE_CHANNEL}"
        )
    requests = {key: request.to_wire() for key, request in (asked.input_requests or {}).items()}
    methods = {key: request["method"] for key, request in requests.items()}
    next_state.handler = HandlerRequests(methods, asked.request_state)
    return requests


def handed_answers(
    asked: HandlerRequests,
    responses: Any,
    models: AnswerModels,
    accepted: dict[str, Any],
) -> dict[str, Any] | None:
    """``ctx.input_responses``: the client's answers to the requests the handler made (``None``
    when the client sent none), each validated as the model of its request's method. An answer
    to a request it did not make, or one that is not an answer to its request, is left out
    (logged). What is handed over is also put in ``accepted``, for the journal."""
    if not isinstance(responses, Mapping):
        return None
    answers: dict[str, Any] = {}
    for key, response in responses.items():
        method = asked.methods.get(key)
        if method is None:
            log.info("an answer to %r, which the handler did not ask for, is left out", key)
            continue
        answer = _as_answer(response, models.get(method, ()))
        if answer is None:
            log.info("the answer to %r is not an answer to %s; it is left out", key, method)
            continue
        answers[key] = answer
        accepted[key] = wire_of(answer)
    return answers


def _as_answer(response: Any, kinds: tuple[type[BaseModel], ...]) -> BaseModel | None:
    if not isinstance(response, Mapping):
        return None
    for kind in kinds:
        try:
            return kind.model_validate(dict(response))
        except ValidationError:
            continue
    return None


__all__ = ["ONE_CHANNEL", "handed_answers", "input_required_of", "keep_requests"]
