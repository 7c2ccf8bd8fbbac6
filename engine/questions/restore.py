"""Questions rebuilt from a checkpoint, for ``once=True`` resolvers that asked one.

A ``once`` resolver does not run again on later rounds, so the question it returned is kept in
the call's state as (kind, rendered params). Rebuilding it here renders the same params (so the
fingerprint matches the recorded answer) and parses answers the way the original would; each
kind says how (``QuestionKind.restore``). A kind this release does not know ends the call as an
unusable requestState: answering it as some other kind of question would hand the resolver an
answer of the wrong shape.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel

from engine.errors import InvalidRequestState
from engine.questions.kinds import UnknownQuestionKind, kind_named
from engine.questions.question import Question

log = logging.getLogger("engine.rounds")


class _Replayed(Question):
    def __init__(self, inner: Question, params: dict[str, Any]) -> None:
        self.inner = inner
        self.params = params
        self.method = inner.method  # type: ignore[misc]
        self.kind = inner.kind  # type: ignore[misc]

    def render(self) -> dict[str, Any]:
        return self.params

    def missing_capability(self, capabilities: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        return self.inner.missing_capability(capabilities)

    def parse(self, answer: Any) -> Any:
        return self.inner.parse(answer)

    def settles(self, outcome: Any) -> bool:
        return self.inner.settles(outcome)

    def kept(self, outcome: Any) -> Any:
        return self.inner.kept(outcome)


def restore_question(
    kind: str, params: dict[str, Any], form_model: type[BaseModel] | None
) -> Question:
    """The question a ``once`` resolver's checkpoint holds, as (kind, rendered params);
    ``InvalidRequestState`` for a kind this release does not know."""
    try:
        restore = kind_named(kind).restore
    except UnknownQuestionKind as exc:
        # Written by a release that knows a kind this one does not: the call cannot go on here.
        log.warning("a once resolver's checkpoint holds a question of unknown kind %r", kind[:64])
        raise InvalidRequestState(
            f"a checkpoint holds a question of unknown kind {kind!r}"
        ) from exc
    return _Replayed(restore(params, form_model), params)
