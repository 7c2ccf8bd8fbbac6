"""What every question is, and what every kind of question declares.

A :class:`Question` is one question asked: it renders to the ``params`` of a client request,
says which client capability it needs, and reads the client's answer. A
:class:`QuestionKind` is what the engine knows of all questions of one kind beyond that: how a
``once`` resolver's question of the kind is rebuilt from the call's state, what a client declares
to be asked it, its label on a trace, how the terminal client answers it. The kinds are listed
once, by their ``kind``, in ``engine/questions/kinds.py``; everything that treats kinds
differently reads them there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ValidationError

from engine.errors import MISSING_CLIENT_CAPABILITY, MCPError

FINGERPRINT_TEXT_MAX = 1024
"""Texts (a message, a URL) longer than this are fingerprinted every time, never cached: the
cache is for the small questions resolvers repeat, and must not hold large values (a
:meth:`Question.fingerprint_key` names none)."""

Outcome = Any
"""What a question resolves to: an elicitation outcome, a sampling result or the roots."""


class BadAnswer(ValueError):
    """An answer that cannot be used for its question; the question is asked again."""


class Question:
    """One question; subclasses say how it renders, what it needs and how answers parse."""

    method: ClassVar[str]
    """The client request it is asked as, in either era."""
    kind: ClassVar[str]
    """Its kind, as registered in ``engine/questions/kinds.py``; it also names the body's
    questions on the wire (``elicit#1``)."""

    def render(self) -> dict[str, Any]:
        raise NotImplementedError

    def missing_capability(self, capabilities: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        """``(name, requiredCapabilities)`` when the client cannot receive this question."""
        raise NotImplementedError

    def parse(self, answer: Any) -> Outcome:
        """The outcome of a wire answer (recorded or fresh); :class:`BadAnswer` when unusable."""
        raise NotImplementedError

    def settles(self, outcome: Outcome) -> bool:
        """Whether this outcome answers the question for good (a URL accept does not)."""
        return True

    def kept(self, outcome: Outcome) -> Any:
        """The answer as the call's state and journal keep it: what :meth:`parse` validated
        into ``outcome``, and nothing else a client sent along (it parses to the same
        outcome)."""
        raise NotImplementedError

    def fingerprint_key(self) -> tuple[Any, ...] | None:
        """What fully decides :meth:`render`, when that is cheap to say, so that its
        fingerprint is computed once for questions asked over and over; ``None``: fingerprint
        it every time (the default, always right)."""
        return None

    def capability_error(self, capabilities: dict[str, Any], asker: str) -> MCPError | None:
        missing = self.missing_capability(capabilities)
        if missing is None:
            return None
        name, required = missing
        return MCPError(
            MISSING_CLIENT_CAPABILITY,
            f"Client did not declare the {name} capability required by {asker}",
            {"requiredCapabilities": required},
        )


class Terminal(Protocol):
    """What the terminal client (``python -m engine call``) offers a kind's prompt: lines said
    to the person, and their answers."""

    def say(self, text: str = "") -> None: ...

    def say_block(self, indent: str, text: str) -> None:
        """A text of several lines, each said indented."""
        ...

    def ask(self, prompt: str) -> str: ...

    def ask_action(self, accepting: str) -> str:
        """``accept``, ``decline`` or ``cancel``; ``accepting`` says what accepting means."""
        ...

    def ask_form(self, schema: Mapping[str, Any]) -> dict[str, Any]:
        """The content of a form, asked field by field against its JSON schema."""
        ...


Restore = Callable[[Mapping[str, Any], type[BaseModel] | None], Question]
"""A question of a kind rebuilt from its rendered params (and, for a form, the model the
resolver's annotation names), so that it parses answers as the original did."""
Prompt = Callable[[Terminal, Mapping[str, Any]], dict[str, Any]]
"""The terminal client's answer to a request of a kind, asked of the person at the terminal."""


def every_request(params: Mapping[str, Any]) -> bool:
    """A kind that has its method to itself: every request of the method is one of its."""
    return True


def same_params(params: dict[str, Any]) -> dict[str, Any]:
    """A kind asked with the same params in both eras."""
    return params


@dataclass(frozen=True, slots=True)
class QuestionKind:
    """One kind of question, and everything the engine treats differently for it.

    The fields with defaults fit a kind that has its request method to itself, is asked the
    same way in both eras, and is kept by a ``once`` resolver like any value.
    """

    kind: str
    """Its name: ``Question.kind`` of its questions, in the call's state and in wire keys."""
    question: type[Question]
    """The class a resolver returns, or a body asks, for it."""
    capability: Mapping[str, Any]
    """What a client declares to be asked every question of the kind (merged over the kinds
    into what an in-process, replay or terminal client declares)."""
    session_keeps: Mapping[str, tuple[str, ...]]
    """The client capability its questions need, with the sub-keys of it a 2025-11-25 session
    keeps (everything else a client declares is dropped)."""
    trace_label: str
    """How a round's span names its questions of this kind (never what they say)."""
    restore: Restore
    """How a ``once=True`` resolver's question is rebuilt from the call's state."""
    prompt: Prompt
    """How the terminal client answers it."""
    callback: str
    """The client callback that answers it: ``engine.testing.Client(elicitation=...)``, the
    official client's ``elicitation_callback``."""
    matches: Callable[[Mapping[str, Any]], bool] = every_request
    """Whether a request of its method with these params is one of this kind's: kinds that
    share a method (a form and a URL elicitation) tell theirs apart by it."""
    once_keeps: bool = True
    """Whether a ``once=True`` resolver's question of this kind is kept in the call's state;
    ``False`` for a kind whose resolver decides it again every round (a URL: the work behind
    it may be done by then)."""
    back_channel: Callable[[dict[str, Any]], dict[str, Any]] = same_params
    """Its rendered params as a 2025-11-25 server→client request sends them; a 2026-07-28
    ``inputRequests`` entry carries them as rendered."""

    @property
    def method(self) -> str:
        """The client request it is asked as, in either era."""
        return self.question.method


def wire_outcome(model: type[BaseModel], answer: Any, what: str) -> Any:
    """``answer`` as the wire ``model`` with only its declared fields (what :meth:`Question.kept`
    may keep as it is); :class:`BadAnswer` naming ``what`` it is not."""
    try:
        return model.model_validate(declared(model.model_validate(answer)))
    except ValidationError as exc:
        raise BadAnswer(f"the answer is not {what}") from exc


def declared(value: Any) -> Any:
    """A wire model's declared fields, recursively, by their wire names: the fields a client
    added beyond the schema (which wire models keep, as ``extra="allow"``) left out."""
    if isinstance(value, BaseModel):
        out = {}
        for name, info in type(value).model_fields.items():
            field = getattr(value, name)
            if field is not None:
                out[info.alias or name] = declared(field)
        return out
    if isinstance(value, list):
        return [declared(item) for item in value]
    return value


__all__ = [
    "FINGERPRINT_TEXT_MAX",
    "BadAnswer",
    "Outcome",
    "Prompt",
    "Question",
    "QuestionKind",
    "Restore",
    "Terminal",
    "declared",
    "wire_outcome",
]
