"""One recorded round, run again in process against the live code, touching nothing outside.

The round runs with the engine's own round machinery on a :func:`detached` copy of the app (no
store, no notifications), with the recorded state and answers, so ``once`` steps are
served from the record and no side effect runs again. :func:`run_round` returns what the live
code did as a :class:`LiveRound`, shaped like the journal's record of the same round, for
:mod:`engine.debug.replay` to compare.
"""

from __future__ import annotations

import contextlib
import copy
import os
import sys
import traceback
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.app import MCPServer
from engine.calls.arguments import InvalidArguments, validate_arguments
from engine.calls.runner import RoundRunner
from engine.calls.walk import SUSPENDED, Round
from engine.context import CallScope, RequestScope
from engine.debug.journal import RecordedCall, RecordedRound, ReplayError
from engine.errors import MCPError, ToolError
from engine.handlers import Handler, Prompt, Resource, Tool, error_result, resource_contents
from engine.protocol.modern import MODERN
from engine.questions.answers import ReplayAsker
from engine.questions.rendering import Rendered
from engine.state.call import CallState

CAPABILITIES: dict[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {"tools": {}},
    "roots": {},
}
"""A replayed round is served as if to a client that can answer anything: the journal does not
keep the client's capabilities, and a round that failed on a missing one was never journaled."""


def detached(app: MCPServer) -> MCPServer:
    """A copy of ``app`` that shares its handlers but reaches no store and notifies nobody.

    Its rounds run without the store (nothing claimed, spilled or journaled, even for a resource
    a handler reads with ``ctx.read_resource``), and the notifications a handler sends are
    dropped instead of reaching the app's listeners or the store's bus.
    """
    live = copy.copy(app)
    live.store = None
    live.store_services = None
    live.rounds = RoundRunner(live)

    async def dropped(*args: Any) -> None:
        return None

    for name in ("notify_list_changed", "notify_resource_updated"):
        setattr(live, name, dropped)
    return live


class InPlaceReplayAsker(ReplayAsker):
    """Replays a round served in 2025-11-25, which asked its questions and got their answers
    within the round: every recorded answer is offered at once, and every question the live
    code asks is kept, answered or not, to compare with the questions the round recorded."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.asked_live: dict[str, Rendered] = {}

    async def ask(self, key: str, question: Rendered, asker: str) -> Any:
        self.asked_live[key] = question
        return await super().ask(key, question, asker)


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
        app.lifespan_context = value if value is not None else {}
        yield


async def run_round(
    app: MCPServer,
    handler: Handler,
    call: RecordedCall,
    recorded: RecordedRound,
    raw_arguments: Any,
    state: CallState,
) -> LiveRound:
    """Run ``recorded`` again with the live code; its result shaped as the round's era sent it
    (a 2025-11-25 client gets no ``resultType`` and no caching hints)."""
    in_place = recorded.answered_in_place
    modern = not in_place
    signature = handler.planned(app.dependency_overrides, app.dependency_overrides.version)
    try:
        arguments = validate_arguments(signature, raw_arguments)
    except InvalidArguments as exc:
        return _failure(handler, str(exc), modern)
    asker = (InPlaceReplayAsker if in_place else ReplayAsker)(
        state,
        recorded.answers,
        CAPABILITIES,
        trust_unsolicited=in_place or app.trust_unsolicited_answers,
    )
    scope = CallScope(handler.name, asker, state, asker.next_state, recorded.round)
    scope.call_id = call.call_id
    request = RequestScope(
        request_id=f"replay-{recorded.round}",
        method=call.method,
        protocol_version=MODERN,
        capabilities=CAPABILITIES,
        meta={},
    )
    verb = _VERBS[handler.role]
    try:
        outcome = await Round(signature, app, request, scope, asker).run(arguments)
    except MCPError as exc:
        return LiveRound("protocol error", {}, protocol_error=f"{exc.code}: {exc.message}")
    except ToolError as exc:
        return LiveRound("error", {}, _error_result(f"{verb} {handler.name}: {exc}", modern))
    except Exception:
        live = _failure(
            handler,
            f"{verb} {handler.name}: an unexpected error occurred; the server log has the details",
            modern,
        )
        live.traceback = _user_traceback()
        return live
    asked = asker.asked_live if isinstance(asker, InPlaceReplayAsker) else asker.pending
    questions = {key: rendered.request() for key, rendered in asked.items()}
    if outcome is not SUSPENDED:
        result = _wire_result(app, handler, outcome, raw_arguments, modern)
        return LiveRound("complete", questions, result, asker.next_state)
    return LiveRound("input_required", questions, None, asker.next_state)


_ENGINE_DIR = str(Path(__file__).resolve().parent) + os.sep


def _user_traceback() -> str:
    """The exception being handled, without the engine's and anyio's frames around the user's."""
    error = traceback.TracebackException(*sys.exc_info())
    kept = [
        frame
        for frame in error.stack
        if not frame.filename.startswith(_ENGINE_DIR) and "anyio" not in Path(frame.filename).parts
    ]
    if kept:
        error.stack = traceback.StackSummary.from_list(kept)
    return "".join(error.format())


_VERBS = {
    "tool": "Error executing tool",
    "prompt": "Error getting prompt",
    "resource": "Error reading resource",
}


def _failure(handler: Handler, text: str, modern: bool) -> LiveRound:
    if handler.role == "tool":
        return LiveRound("error", {}, _error_result(text, modern))
    return LiveRound("protocol error", {}, protocol_error=text)


def _error_result(text: str, modern: bool) -> dict[str, Any]:
    result = error_result(text)
    if modern:
        result["resultType"] = "complete"
    return result


def _wire_result(
    app: MCPServer, handler: Handler, value: Any, arguments: Any, modern: bool
) -> dict[str, Any]:
    if isinstance(handler, Tool | Prompt):
        result = handler.result(value)
    elif isinstance(handler, Resource):
        uri = handler.uri
        for name, part in (arguments or {}).items():
            uri = uri.replace("{" + str(name) + "}", str(part))
        result = {"contents": resource_contents(uri, value, handler.mime_type)}
        if modern:
            result |= {"ttlMs": app.list_ttl_ms, "cacheScope": "public"}
    else:  # pragma: no cover - every handler is one of the three
        raise ReplayError(f"cannot build the result of a {handler.role}")
    if modern:
        result["resultType"] = "complete"
    return result


__all__ = ["CAPABILITIES", "LiveRound", "detached", "lifespan", "run_round"]
