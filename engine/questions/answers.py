"""How a question gets its answer: the seam between the round machine and the era.

On 2026-07-28 a question is answered from the call's record, from the client's
``inputResponses``, or it is pending and the round ends with ``input_required``
(:class:`StatelessAnswers`). On 2025-11-25 the same question becomes a server→client request
and the round waits for the response in place
(:class:`~engine.fleet.backchannel.BackChannelAnswers`). The round machine only ever calls
:meth:`AnswerSource.ask`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any, Protocol

from engine._internal.markers import Marker
from engine.questions.kinds import BadAnswer
from engine.questions.rendering import Rendered
from engine.state.call import CallState

log = logging.getLogger("engine.rounds")


PENDING: Any = Marker("PENDING")
"""Returned by :meth:`AnswerSource.ask` when the question must go to the client first."""


class AnswerSource(Protocol):
    """Answers a round's questions, and keeps what the round's journal event records."""

    next_state: CallState
    """The call's state as this round leaves it: answers to keep, checkpoints taken."""
    accepted: dict[str, Any]
    """Answers this round took from the client, by question key."""
    asked_in_place: Mapping[str, dict[str, Any]]
    """Questions asked and answered within this round (2025-11-25), as they were sent."""
    on_checkpoint: Callable[[str], Awaitable[None]] | None
    """Called with its key as soon as a checkpoint is taken, before the round goes on: a task
    keeps it in the store at once, so a replica that takes the task over does not repeat it."""
    before_once: Callable[[str], Awaitable[None]] | None
    """Called with its key before a ``once`` step runs (``ctx.once``, a ``once=True``
    resolver): where the round or task holds a claim, it makes sure the hold is still its own,
    and raises or stops the run otherwise, so a step runs nowhere its successor may run it."""

    async def ask(self, key: str, question: Rendered, asker: str) -> Any:
        """The outcome of the question, or :data:`PENDING`."""
        ...

    @property
    def answer(self) -> Callable[[str, Rendered, str], Any] | None:
        """:meth:`ask` without an await, where a question is answered from what the request
        carries (``None``: the answer must be waited for): a round asks without a coroutine."""
        ...

    def new_checkpoints(self) -> dict[str, Any]:
        """Checkpoints this round took (``once`` steps run for the first time)."""
        ...


NOTHING_IN_PLACE: Mapping[str, dict[str, Any]] = MappingProxyType({})


class StatelessAnswers:
    """Answers from the record or the client's responses; collects what must still be asked.

    ``state`` is the call's state as it arrived; ``next_state`` is being built for the next
    round: recorded answers carry over, newly accepted answers are added, mismatched ones dropped.
    """

    asked_in_place = NOTHING_IN_PLACE

    def __init__(
        self,
        state: CallState,
        responses: dict[str, Any] | None,
        capabilities: dict[str, Any],
        trust_unsolicited: bool = False,
    ) -> None:
        self.state = state
        self.responses = responses or {}
        self.capabilities = capabilities
        self.trust_unsolicited = trust_unsolicited
        self.next_state = CallState(dict(state.answers), {}, dict(state.checkpoints))
        self.pending: dict[str, Rendered] = {}
        self.accepted: dict[str, Any] = {}
        """Answers taken from this round's ``inputResponses``."""
        self.on_checkpoint: Callable[[str], Awaitable[None]] | None = None
        self.before_once: Callable[[str], Awaitable[None]] | None = None

    def new_checkpoints(self) -> dict[str, Any]:
        old = self.state.checkpoints
        recorded = self.next_state.checkpoints
        if len(recorded) == len(old):  # it starts as a copy of the old ones: none were added
            return {}
        return {k: v for k, v in recorded.items() if k not in old}

    async def ask(self, key: str, question: Rendered, asker: str) -> Any:
        return self.answer(key, question, asker)

    def answer(self, key: str, question: Rendered, asker: str) -> Any:
        """The outcome of the question, or :data:`PENDING`: nothing to wait for, the answers
        are in the request (what a subclass changes of asking, it changes here)."""
        recorded = self.state.answers.get(key)
        if recorded is not None:
            fp, answer = recorded
            if fp == question.fingerprint:
                try:
                    outcome = question.question.parse(answer)
                except BadAnswer:
                    outcome = None
                if outcome is not None and question.settles(outcome):
                    return outcome
            else:
                log.info("%s asked a different question than the recorded one; asking again", asker)
            self.next_state.answers.pop(key, None)
        if key in self.responses:
            expected = self.state.asked.get(key)
            solicited = expected == question.fingerprint
            unsolicited_ok = expected is None and self.trust_unsolicited
            if solicited or unsolicited_ok:
                answer = self.responses[key]
                try:
                    outcome = question.question.parse(answer)
                except BadAnswer as exc:
                    log.info("%s got an unusable answer (%s); asking again", asker, exc)
                else:
                    if question.settles(outcome):
                        kept = question.question.kept(outcome)  # no junk a client added
                        self.next_state.answers[key] = (question.fingerprint, kept)
                        self.accepted[key] = kept
                        return outcome
            else:
                log.info(
                    "%s got an answer to a question that was not asked in that form; asking again",
                    asker,
                )
        error = question.question.capability_error(self.capabilities, asker)
        if error is not None:
            raise error
        self.pending[key] = question
        self.next_state.asked[key] = question.fingerprint
        return PENDING
