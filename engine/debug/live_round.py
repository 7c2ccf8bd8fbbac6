"""One recorded round, run again in process against the live code, touching nothing outside.

The round goes through :func:`~engine.calls.execute.execute_round`, the executor live calls
use, with the recorded state and answers, so ``once`` steps are served from the record and no
side effect runs again. What the handler reaches of its server is :class:`Detached`: resources
are read with a runner that has no store, and notifications go nowhere. The result is shaped as
the round's era sent it, for :mod:`engine.debug.replay` to compare with the record.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.app import MCPServer
from engine.calls.execute import Outcome, execute_round, fails_as_protocol_error
from engine.calls.reply import ReplyKind, RoundReply
from engine.calls.runner import RoundRunner
from engine.debug.journal import RecordedCall, RecordedRound
from engine.errors import MCPError
from engine.handlers.base import Handler
from engine.handlers.resource import Resource
from engine.handlers.results import ReadResourceContents
from engine.operations import Operations, converter
from engine.protocol import legacy, modern
from engine.questions.answers import StatelessAnswers
from engine.questions.kinds import declared_capabilities
from engine.questions.rendering import Rendered
from engine.scope import RequestScope
from engine.state.call import CallState


class Detached:
    """The server a replayed handler reaches: the app's own resources, read by a runner with no
    store (nothing claimed, spilled or journaled), and notifications that reach nobody."""

    def __init__(self, app: MCPServer) -> None:
        self.app = app
        settings = app.settings
        runner = RoundRunner(
            keys=app.keys,
            tokens=settings.tokens,
            journal=settings.journal,
            spill_threshold=settings.store.spill_threshold,
            services=None,
            principal=None,
            replica_id=settings.replica_id,
            hooks=self,
            overrides=app.dependency_overrides,
        )
        self.operations = Operations(app.registry, runner, app.core.metrics)

    @property
    def mcp_server(self) -> MCPServer:
        return self.app

    @property
    def lifespan_context(self) -> Any:
        return self.app.lifespan_context

    async def read_resource_contents(
        self, uri: str, scope: RequestScope
    ) -> list[ReadResourceContents]:
        return await self.operations.read_resource_contents(uri, scope)

    async def notify_list_changed(self, kind: str) -> None:
        return None

    async def notify_resource_updated(self, uri: str) -> None:
        return None


class InPlaceRecordedAnswers(StatelessAnswers):
    """Replays a round served in 2025-11-25, which asked its questions and got their answers
    within the round: every recorded answer is offered at once, and every question the live
    code asks is kept, answered or not, to compare with the questions the round recorded."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.asked_live: dict[str, Rendered] = {}

    def answer(self, key: str, question: Rendered, asker: str) -> Any:
        self.asked_live[key] = question
        return super().answer(key, question, asker)


@dataclass(slots=True)
class LiveRound:
    """What the live code did in one round."""

    kind: str
    questions: dict[str, Any]
    result: Any = None
    next_state: CallState = field(default_factory=CallState)
    traceback: str | None = None
    protocol_error: str | None = None


@contextlib.asynccontextmanager
async def lifespan(app: MCPServer) -> AsyncIterator[None]:
    """The app's lifespan, if it has one: handlers may need what it yields."""
    if app.lifespan is None:
        yield
        return
    async with app.lifespan(app) as value:
        app.core.lifespan_context = value if value is not None else {}
        yield


async def run_live_round(
    detached: Detached,
    handler: Handler,
    call: RecordedCall,
    recorded: RecordedRound,
    raw_arguments: Any,
    state: CallState,
) -> LiveRound:
    """Run ``recorded`` again with the live code; its result shaped as the round's era sent it
    (a 2025-11-25 client gets no ``resultType`` and no caching hints)."""
    app = detached.app
    # Served as if to a client that can be asked every kind of question: the journal does not
    # keep the client's capabilities, and a round that failed on a missing one was never
    # journaled.
    capabilities = declared_capabilities()
    in_place = recorded.answered_in_place
    is_modern = not in_place
    answers = (InPlaceRecordedAnswers if in_place else StatelessAnswers)(
        state,
        recorded.answers,
        capabilities,
        trust_unsolicited=in_place or app.settings.tokens.trust_unsolicited_answers,
    )
    scope = RequestScope(
        request_id=f"replay-{recorded.round}",
        method=call.method,
        protocol_version=modern.MODERN,
        capabilities=capabilities,
        meta={},
    )
    target = _uri_read(handler, raw_arguments)
    try:
        executed = await execute_round(
            handler,
            raw_arguments,
            scope,
            call.call_id,
            recorded.round,
            state,
            answers,
            hooks=detached,
            overrides=app.dependency_overrides,
            convert=converter(handler, target),
            before_body=_made_a_task if recorded.kind == "task" else None,
            target=target,
            input_responses=recorded.answers,
        )
    except MCPError as exc:
        return LiveRound("protocol error", {}, protocol_error=f"{exc.code}: {exc.message}")
    if executed.outcome is Outcome.FAILED:
        text = executed.error or ""
        if fails_as_protocol_error(handler):
            live = LiveRound("protocol error", {}, protocol_error=text)
        else:
            live = LiveRound(
                "error", {}, _shaped(RoundReply(ReplyKind.ERROR, error=text), is_modern)
            )
        if executed.unexpected is not None:
            live.traceback = _user_traceback(executed.unexpected)
        return live
    if executed.outcome is Outcome.HANDLER_ASKED:  # the handler's own input requests
        return LiveRound("input_required", executed.value, None, answers.next_state)
    asked = answers.asked_live if isinstance(answers, InPlaceRecordedAnswers) else answers.pending
    questions = {key: rendered.request() for key, rendered in asked.items()}
    if executed.outcome is Outcome.SUSPENDED:
        return LiveRound("input_required", questions, None, answers.next_state)
    if executed.outcome is Outcome.DEFERRED:  # the round that made a task stops before the body
        return LiveRound("task", questions, None, answers.next_state)
    value = executed.value
    if is_modern and isinstance(handler, Resource):
        modern.cacheable(value, app.core.result_hints["resources/read"])
    result = _shaped(RoundReply(ReplyKind.COMPLETE, value), is_modern)
    return LiveRound("complete", questions, result, answers.next_state)


async def _made_a_task(arguments: dict[str, Any]) -> bool:
    """A recorded round that made a task: its body ran in the rounds after it."""
    return True


def _shaped(reply: RoundReply, is_modern: bool) -> dict[str, Any]:
    """A round's result as its era puts it on the wire."""
    return modern.round_result(reply) if is_modern else legacy.round_result(reply)


def _uri_read(handler: Handler, arguments: Any) -> str:
    """The URI a recorded ``resources/read`` read: a template's parameters filled in."""
    if not isinstance(handler, Resource):
        return ""
    uri = handler.uri
    for name, part in (arguments or {}).items():
        uri = uri.replace("{" + str(name) + "}", str(part))
    return uri


_ENGINE_DIR = str(Path(__file__).resolve().parent.parent) + os.sep


def _user_traceback(exc: BaseException) -> str:
    """``exc``'s traceback without the engine's and anyio's frames around the user's."""
    error = traceback.TracebackException.from_exception(exc)
    kept = [
        frame
        for frame in error.stack
        if not frame.filename.startswith(_ENGINE_DIR) and "anyio" not in Path(frame.filename).parts
    ]
    if kept:
        error.stack = traceback.StackSummary.from_list(kept)
    return "".join(error.format())


__all__ = ["Detached", "LiveRound", "lifespan", "run_live_round"]
