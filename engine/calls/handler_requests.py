"""Input a handler asks the client for itself, by returning an ``InputRequiredResult``.

The returned value, once recognised (``engine/input_requests.py``), is checked against the rest
of the call and kept in the call's next state: the method of each request and the handler's own
``request_state`` string, which are sealed into the server's ``requestState`` like everything
else the call carries. On the retry the handler gets that string back as ``ctx.request_state``
and the client's answers as ``ctx.input_responses``: only answers to requests it made, each as
the model of what was asked.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from engine.di.input_required import AnswerModels
from engine.di.signature import Signature
from engine.state.call import CallState, HandlerRequests
from engine.types import InputRequiredResult, wire_of

log = logging.getLogger("engine.rounds")

ONE_CHANNEL = (
    "a call asks the client through one channel: let the resolvers and ctx.elicit / ctx.sample "
    "/ ctx.list_roots ask, or return the handler's own input requests, not both"
)


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


__all__ = ["ONE_CHANNEL", "handed_answers", "keep_requests"]
