"""Elicitation (``elicitation/create``): a form for the user to fill, or a URL to send them to,
and the outcomes either gets back. Two kinds share the method, told apart by ``mode``."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ValidationError
from typing_extensions import TypeAliasType

from engine._internal.typecache import instance_test
from engine.questions.forms import elicitation_schema
from engine.questions.question import (
    FINGERPRINT_TEXT_MAX,
    BadAnswer,
    Outcome,
    Question,
    QuestionKind,
    Terminal,
)

T = TypeVar("T")
ModelT = TypeVar("ModelT", bound=BaseModel)


class AcceptedElicitation(BaseModel, Generic[T]):
    """The user answered the form; ``data`` is the validated answer."""

    action: Literal["accept"] = "accept"
    data: T


class DeclinedElicitation(BaseModel):
    """The user saw the question and said no."""

    action: Literal["decline"] = "decline"


class CancelledElicitation(BaseModel):
    """The user dismissed the question without choosing."""

    action: Literal["cancel"] = "cancel"


ElicitationResult = TypeAliasType(
    "ElicitationResult",
    AcceptedElicitation[T] | DeclinedElicitation | CancelledElicitation,
    type_params=(T,),
)

Accepted = AcceptedElicitation[Any]
"""``AcceptedElicitation`` for any data, built once (subscripting a generic model is not free)."""
OUTCOMES = (AcceptedElicitation, DeclinedElicitation, CancelledElicitation)
REFUSALS = (DeclinedElicitation, CancelledElicitation)
is_outcome = instance_test(*OUTCOMES)
is_accepted = instance_test(AcceptedElicitation)
is_refusal = instance_test(*REFUSALS)


def _short(*texts: Any) -> bool:
    return all(type(t) is str and len(t) <= FINGERPRINT_TEXT_MAX for t in texts)


class _Elicitation(Question):
    """What both modes of ``elicitation/create`` share: how an answer is read, declined or
    cancelled; each mode says what an accepted answer gives."""

    method = "elicitation/create"

    def missing_capability(self, capabilities: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        """What a client lacks to be shown a form (an empty ``elicitation`` declares forms);
        a URL elicitation says otherwise."""
        elicitation = capabilities.get("elicitation")
        if isinstance(elicitation, dict) and (not elicitation or "form" in elicitation):
            return None
        return "form elicitation", {"elicitation": {"form": {}}}

    def parse(self, answer: Any) -> Outcome:
        if not isinstance(answer, dict):
            raise BadAnswer("an elicitation answer must be an object")
        action = answer.get("action")
        if action == "accept":
            return self.accepted(answer.get("content"))
        if action == "decline":
            return DeclinedElicitation()
        if action == "cancel":
            return CancelledElicitation()
        raise BadAnswer("an elicitation answer needs action accept, decline or cancel")

    def accepted(self, content: Any) -> Outcome:
        """The outcome of an answer that accepts with this ``content``."""
        raise NotImplementedError

    def kept(self, outcome: Outcome) -> Any:
        if isinstance(outcome, AcceptedElicitation):
            return self.kept_acceptance(outcome)
        return {"action": outcome.action}

    def kept_acceptance(self, outcome: AcceptedElicitation[Any]) -> dict[str, Any]:
        return {"action": "accept"}


class Elicit(_Elicitation, Generic[ModelT]):
    """Ask the user to fill a form described by a flat pydantic model."""

    kind = "elicit"

    def __init__(self, message: str, schema: type[ModelT]) -> None:
        self.message = message
        self.schema = schema

    def render(self) -> dict[str, Any]:
        return {
            "mode": "form",
            "message": self.message,
            "requestedSchema": elicitation_schema(self.schema),
        }

    def accepted(self, content: Any) -> Outcome:
        if not isinstance(content, dict):
            raise BadAnswer("an accepted form elicitation needs content")
        try:
            data = self.schema.model_validate(content)
        except ValidationError as exc:
            raise BadAnswer("the accepted content does not match the requested schema") from exc
        return Accepted(data=data)

    def kept_acceptance(self, outcome: AcceptedElicitation[Any]) -> dict[str, Any]:
        content = outcome.data.model_dump(mode="json", by_alias=True)
        return {"action": "accept", "content": content}

    def fingerprint_key(self) -> tuple[Any, ...] | None:
        """An exact ``Elicit`` renders from its message and form model alone (the form's
        schema is built once per model); a subclass may render more."""
        message = self.message
        if type(self) is Elicit and type(message) is str and len(message) <= FINGERPRINT_TEXT_MAX:
            return (Elicit, message, self.schema)
        return None


class ElicitForm(_Elicitation):
    """Ask the user to fill a form given as a JSON schema (``ctx.session.elicit_form``): the
    accepted content comes back as the client sent it, unvalidated."""

    kind = "elicit"

    def __init__(self, message: str, requested_schema: dict[str, Any]) -> None:
        self.message = message
        self.requested_schema = requested_schema

    def render(self) -> dict[str, Any]:
        return {"mode": "form", "message": self.message, "requestedSchema": self.requested_schema}

    def accepted(self, content: Any) -> Outcome:
        if content is not None and not isinstance(content, dict):
            raise BadAnswer("the accepted content of a form must be an object")
        return Accepted(data=content)

    def kept_acceptance(self, outcome: AcceptedElicitation[Any]) -> dict[str, Any]:
        if outcome.data is None:
            return {"action": "accept"}
        return {"action": "accept", "content": outcome.data}


class ElicitURL(_Elicitation):
    """Send the user to a URL (sign-in, payment, anything that must not pass through the client).

    Accepting only means the user agreed to open the page. A resolver that returns the same
    ``ElicitURL`` again on the next round (because the work behind the URL is not done yet) asks
    again; a body that calls ``ctx.elicit_url`` gets the user's choice back.
    """

    kind = "elicit_url"

    def __init__(self, message: str, url: str, elicitation_id: str | None = None) -> None:
        self.message = message
        self.url = url
        self.elicitation_id = elicitation_id
        """What the client is told the elicitation is called, for the
        ``notifications/elicitation/complete`` that ends it; without one, each asking gets a
        random one."""

    def render(self) -> dict[str, Any]:
        params = {"mode": "url", "message": self.message, "url": self.url}
        if self.elicitation_id is not None:
            params["elicitationId"] = self.elicitation_id
        return params

    def missing_capability(self, capabilities: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        elicitation = capabilities.get("elicitation")
        if isinstance(elicitation, dict) and "url" in elicitation:
            return None
        return "URL elicitation", {"elicitation": {"url": {}}}

    def accepted(self, content: Any) -> Outcome:
        return Accepted(data=None)

    def settles(self, outcome: Outcome) -> bool:
        return not isinstance(outcome, AcceptedElicitation)

    def fingerprint_key(self) -> tuple[Any, ...] | None:
        """An exact ``ElicitURL`` without an elicitation id renders from its message and URL."""
        if (
            type(self) is ElicitURL
            and self.elicitation_id is None
            and _short(self.message, self.url)
        ):
            return (ElicitURL, self.message, self.url)
        return None


def _restore_form(params: Mapping[str, Any], form_model: type[BaseModel] | None) -> Question:
    return Elicit(params.get("message", ""), form_model or BaseModel)


def _restore_url(params: Mapping[str, Any], form_model: type[BaseModel] | None) -> Question:
    return ElicitURL(params.get("message", ""), params.get("url", ""))


def _is_url(params: Mapping[str, Any]) -> bool:
    return bool(params.get("mode", "form") == "url")


def _is_form(params: Mapping[str, Any]) -> bool:
    return not _is_url(params)


def _with_elicitation_id(params: dict[str, Any]) -> dict[str, Any]:
    """A 2025-11-25 URL elicitation names itself: a random id when the asker gave none."""
    if "elicitationId" in params:
        return params
    return {**params, "elicitationId": secrets.token_urlsafe(16)}


def _ask_form(terminal: Terminal, params: Mapping[str, Any]) -> dict[str, Any]:
    terminal.say_block("  ", str(params.get("message", "")))
    action = terminal.ask_action("and fill in the form")
    if action != "accept":
        return {"action": action}
    return {"action": "accept", "content": terminal.ask_form(params.get("requestedSchema") or {})}


def _ask_url(terminal: Terminal, params: Mapping[str, Any]) -> dict[str, Any]:
    terminal.say_block("  ", str(params.get("message", "")))
    terminal.say(f"  Open this URL in a browser: {params.get('url')}")
    return {"action": terminal.ask_action("(you opened it)")}


ELICIT = QuestionKind(
    kind=Elicit.kind,
    question=Elicit,
    capability={"elicitation": {"form": {}}},
    session_keeps={"elicitation": ("form",)},
    trace_label="elicit",
    restore=_restore_form,
    prompt=_ask_form,
    callback="elicitation",
    matches=_is_form,
)
ELICIT_URL = QuestionKind(
    kind=ElicitURL.kind,
    question=ElicitURL,
    capability={"elicitation": {"url": {}}},
    session_keeps={"elicitation": ("url",)},
    trace_label="elicit",
    restore=_restore_url,
    prompt=_ask_url,
    callback="elicitation",
    matches=_is_url,
    once_keeps=False,
    back_channel=_with_elicitation_id,
)

__all__ = [
    "ELICIT",
    "ELICIT_URL",
    "AcceptedElicitation",
    "CancelledElicitation",
    "DeclinedElicitation",
    "Elicit",
    "ElicitForm",
    "ElicitURL",
    "ElicitationResult",
]
