"""The question kinds, by their ``kind``: the one table that everything treating kinds
differently reads (restoring a ``once`` resolver's question, the era's request, what a client
declares to be asked, the labels on a trace, the terminal client's prompts).

A question whose kind is not in the table is an error wherever it meets the engine: asked, it
cannot be rendered; found in a call's state, the call cannot go on. docs/architecture.md, "How to
add a question kind", says where a new kind goes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from engine.questions.elicit import (
    ELICIT,
    ELICIT_URL,
    Accepted,
    AcceptedElicitation,
    CancelledElicitation,
    DeclinedElicitation,
    Elicit,
    ElicitationResult,
    ElicitForm,
    ElicitURL,
    is_accepted,
    is_outcome,
    is_refusal,
)
from engine.questions.question import BadAnswer, Outcome, Question, QuestionKind
from engine.questions.roots import ROOTS, ListRoots
from engine.questions.sample import SAMPLE, Sample

KINDS: dict[str, QuestionKind] = {}
"""Every question kind, by its ``kind``."""

ADD_A_KIND = "docs/architecture.md, 'How to add a question kind'"


class UnknownQuestionKind(LookupError):
    """A question of a kind the table does not hold: it cannot be asked, kept or restored."""


def register(kind: QuestionKind) -> QuestionKind:
    """Add ``kind`` to the table; a second, different kind of the same name is refused."""
    if kind.question.kind != kind.kind:
        raise ValueError(
            f"question kind {kind.kind!r} names {kind.question.__name__}, whose kind is "
            f"{kind.question.kind!r}: give them the same name"
        )
    known = KINDS.get(kind.kind)
    if known is not None and known != kind:
        raise ValueError(f"question kind {kind.kind!r} is already registered, for {known.question}")
    KINDS[kind.kind] = kind
    return kind


for _kind in (ELICIT, ELICIT_URL, SAMPLE, ROOTS):
    register(_kind)


def kind_named(kind: str) -> QuestionKind:
    """The kind of that name; :class:`UnknownQuestionKind` when none is registered."""
    found = KINDS.get(kind)
    if found is None:
        raise UnknownQuestionKind(
            f"no question kind {kind[:64]!r} is registered (known: {', '.join(KINDS)}); "
            f"register it in engine/questions/kinds.py ({ADD_A_KIND})"
        )
    return found


def kind_of(question: Question) -> QuestionKind:
    """The kind of a question being asked; :class:`UnknownQuestionKind` names its class when
    its kind is not registered."""
    found = KINDS.get(question.kind)
    if found is None:
        raise UnknownQuestionKind(
            f"{type(question).__name__} asks a question of kind {question.kind!r}, which is not "
            f"registered (known: {', '.join(KINDS)}): register a QuestionKind for it in "
            f"engine/questions/kinds.py ({ADD_A_KIND})"
        )
    return found


def kind_of_request(request: Any) -> QuestionKind | None:
    """The kind a client request (``{"method", "params"}``, as sent) asks; ``None`` when no
    registered kind asks it."""
    if not isinstance(request, Mapping):
        return None
    method = request.get("method")
    params = request.get("params")
    if not isinstance(params, Mapping):
        params = {}
    for kind in KINDS.values():
        if kind.method == method and kind.matches(params):
            return kind
    return None


def declared_capabilities(callbacks: Collection[str] | None = None) -> dict[str, Any]:
    """What a client declares to be asked every question of every kind (or, given callback
    names, of the kinds those callbacks answer), as a new dict of its own."""
    merged: dict[str, Any] = {}
    for kind in KINDS.values():
        if callbacks is None or kind.callback in callbacks:
            _merge(merged, kind.capability)
    return merged


def _merge(into: dict[str, Any], extra: Mapping[str, Any]) -> None:
    for name, value in extra.items():
        if isinstance(value, Mapping):
            inner = into.get(name)
            if not isinstance(inner, dict):
                inner = into[name] = {}
            _merge(inner, value)
        else:
            into[name] = value


def session_keeps() -> dict[str, tuple[str, ...]]:
    """The client capabilities a 2025-11-25 session keeps, with their known sub-keys: those
    the kinds' questions need."""
    kept: dict[str, tuple[str, ...]] = {}
    for kind in KINDS.values():
        for name, keys in kind.session_keeps.items():
            have = kept.get(name, ())
            kept[name] = have + tuple(key for key in keys if key not in have)
    return kept


def trace_labels(requests: Mapping[str, Any]) -> list[str]:
    """The labels of the kinds of the questions sent (``elicit``, ``sample``, ``roots``), each
    once, in order: a span names what was asked, never what it said."""
    labels: list[str] = []
    for request in requests.values():
        kind = kind_of_request(request)
        if kind is not None and kind.trace_label not in labels:
            labels.append(kind.trace_label)
    return labels


__all__ = [
    "KINDS",
    "Accepted",
    "AcceptedElicitation",
    "BadAnswer",
    "CancelledElicitation",
    "DeclinedElicitation",
    "Elicit",
    "ElicitForm",
    "ElicitURL",
    "ElicitationResult",
    "ListRoots",
    "Outcome",
    "Question",
    "QuestionKind",
    "Sample",
    "UnknownQuestionKind",
    "is_accepted",
    "is_outcome",
    "is_refusal",
    "kind_named",
    "kind_of",
    "kind_of_request",
    "register",
    "session_keeps",
    "trace_labels",
]
