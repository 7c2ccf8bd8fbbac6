"""Re-run a recorded call against the code you have now, and say where it stops matching.

A round is a function of (code, arguments, state, answers), and the journal keeps everything
but the code: for each round, the questions asked, the answers accepted, the values ``once``
steps recorded, and the result. So re-running every round with the recorded state and answers
must ask the same questions and return the same result — unless the code changed in a way that
would strand the calls that are waiting for an answer right now, or that changes what a user
gets. That is the check a deploy needs, and the debugger a failing call needs.

Replay runs in process with the engine's own round machinery, serves ``once`` steps from the
record (no side effect runs again), never touches a store, and reports the *first* divergence:
the round, the question key, what was recorded and what the live code does. A recorded call
exported as JSON (a fixture) replays the same way, so it can become a regression test
(:func:`engine.testing.replay`).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import difflib
import itertools
import json
import os
import sys
import time
import traceback
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic_core import to_json

from engine.asking import ReplayAsker
from engine.calls import RoundRunner
from engine.context import CallScope, Context, RequestScope
from engine.errors import MCPError, ToolError
from engine.handlers import (
    Handler,
    Prompt,
    Resource,
    Tool,
    code_digest,
    error_result,
    resource_contents,
)
from engine.protocol.modern import MODERN
from engine.rounds import Completed, InvalidArguments, Round, validate_arguments
from engine.server import MCPServer
from engine.state import CallState
from stores import Store

FORMAT = "engine-call/1"
"""The ``format`` of an exported call (a fixture)."""

CAPABILITIES: dict[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {"tools": {}},
    "roots": {},
}
"""A replayed round is served as if to a client that can answer anything: the journal does not
keep the client's capabilities, and a round that failed on a missing one was never journaled."""

HOW_TO_RECORD_ARGUMENTS = (
    "record them by serving with journal_arguments=True (or ENGINE_JOURNAL_ARGUMENTS=1), or "
    "give them to replay: --args '{...}' on the command line, arguments={...} in Python"
)


class ReplayError(Exception):
    """The call cannot be replayed or read; the message says what to do about it."""


# --- a recorded call ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordedRound:
    """One journal event, as the replayer and the timeline read it."""

    round: int
    kind: str
    ts: float | None
    method: str
    target: str
    arguments: Any
    questions: dict[str, Any]
    answers: dict[str, Any]
    checkpoints: dict[str, Any]
    response: Any
    """The result as the client received it (decoded JSON), ``_meta`` included."""
    duration_ms: float | None
    replica: str | None
    code: str | None

    @classmethod
    def of(cls, event: Mapping[str, Any]) -> RecordedRound:
        number = event.get("round")
        if isinstance(number, bool) or not isinstance(number, int):
            raise ReplayError(
                f"a journal event has no round number ({sorted(event)}); was it written by "
                "this engine?"
            )
        ts = event.get("ts")
        duration = event.get("duration_ms")
        return cls(
            round=number,
            kind=str(event.get("kind") or "?"),
            ts=float(ts) if isinstance(ts, int | float) and not isinstance(ts, bool) else None,
            method=str(event.get("method") or "tools/call"),
            target=str(event.get("target") or "?"),
            arguments=event.get("arguments"),
            questions=_mapping(event.get("questions")),
            answers=_mapping(event.get("answers")),
            checkpoints=_mapping(event.get("checkpoints")),
            response=event.get("response"),
            duration_ms=float(duration) if isinstance(duration, int | float) else None,
            replica=event.get("replica") if isinstance(event.get("replica"), str) else None,
            code=event.get("code") if isinstance(event.get("code"), str) else None,
        )

    @property
    def result(self) -> Any:
        """The result without ``_meta`` (what the code decided, not where it ran)."""
        if isinstance(self.response, dict):
            return {k: v for k, v in self.response.items() if k != "_meta"}
        return self.response


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


@dataclass(slots=True)
class RecordedCall:
    """Every journaled round of one call, from a store or from an exported fixture."""

    call_id: str
    events: list[dict[str, Any]]
    """The journal events as JSON-compatible dicts (the response decoded), in append order."""
    rounds: list[RecordedRound] = field(init=False)

    def __post_init__(self) -> None:
        if not self.events:
            raise ReplayError(f"call {self.call_id} has no journal events")
        self.rounds = [RecordedRound.of(event) for event in self.events]

    @classmethod
    def from_events(cls, call_id: str, events: Iterable[Mapping[str, Any]]) -> RecordedCall:
        """From a store's events (bytes and all)."""
        return cls(call_id, [_jsonable_event(event) for event in events])

    @classmethod
    def from_document(cls, document: Any, source: str = "the fixture") -> RecordedCall:
        """From what :meth:`to_document` produced (an exported fixture)."""
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise ReplayError(
                f"{source} is not an exported call (expected a JSON object with "
                f'"format": "{FORMAT}"); make one with `python -m engine export CALL_ID`'
            )
        events = document.get("events")
        call_id = document.get("call_id")
        if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
            raise ReplayError(f'{source} has no "events" list of journal events')
        return cls(str(call_id or "?"), [_jsonable_event(event) for event in events])

    @classmethod
    def load(cls, path: str | Path) -> RecordedCall:
        """Read an exported fixture."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ReplayError(f"cannot read {path}: {exc.strerror or exc}") from None
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise ReplayError(f"{path} is not JSON ({exc})") from None
        return cls.from_document(document, str(path))

    def to_document(self) -> dict[str, Any]:
        return {"format": FORMAT, "call_id": self.call_id, "events": self.events}

    def dumps(self) -> str:
        """The fixture text: indented JSON, one call."""
        return json.dumps(self.to_document(), indent=2, ensure_ascii=False) + "\n"

    @property
    def first(self) -> RecordedRound:
        return self.rounds[0]

    @property
    def method(self) -> str:
        return self.first.method

    @property
    def target(self) -> str:
        return self.first.target

    @property
    def arguments(self) -> Any:
        """The arguments, if the server recorded them (``None`` otherwise)."""
        for recorded in self.rounds:
            if recorded.arguments is not None:
                return recorded.arguments
        return None

    def ordered_rounds(self) -> list[RecordedRound]:
        """Rounds 1..n, one event each; :class:`ReplayError` if the journal has a gap."""
        by_round: dict[int, RecordedRound] = {}
        for recorded in self.rounds:
            by_round.setdefault(recorded.round, recorded)  # a retried append is kept once
        numbers = sorted(by_round)
        missing = sorted(set(range(1, numbers[-1] + 1)) - set(numbers))
        if missing:
            raise ReplayError(
                f"the journal of call {self.call_id} lacks round(s) {missing}: they expired "
                "(journal_ttl) or were not written while the store was down, so the call "
                "cannot be replayed"
            )
        return [by_round[n] for n in numbers]


def _jsonable_event(event: Mapping[str, Any]) -> dict[str, Any]:
    out = {str(k): jsonable(v) for k, v in event.items()}
    response = event.get("response")
    if isinstance(response, bytes | bytearray):
        try:
            out["response"] = json.loads(response)
        except ValueError:
            out["response"] = {"$bytes": base64.b64encode(response).decode("ascii")}
    return out


def jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    return value


async def load_call(store: Store, call_id: str) -> RecordedCall:
    """A call's journal from a store; :class:`ReplayError` when the store does not have it."""
    events = await store.events(call_id)
    if not events:
        raise ReplayError(
            f"no call {call_id!r} in the store (its journal may have expired after journal_ttl); "
            "list the recorded calls with `python -m engine calls`"
        )
    return RecordedCall.from_events(call_id, events)


def load_fixture(path: str | Path) -> RecordedCall:
    """An exported call (``python -m engine export CALL_ID > fixture.json``)."""
    return RecordedCall.load(path)


# --- the report ----------------------------------------------------------------------------------


@dataclass(slots=True)
class Divergence:
    """The first place where the live code does something other than the record."""

    round: int
    what: str
    """``question``, ``result`` or ``outcome`` (the round ended differently)."""
    key: str | None
    summary: str
    recorded: Any
    live: Any

    def render(self) -> str:
        where = f"round {self.round}" + (f", question {self.key!r}" if self.key else "")
        lines = [f"DIVERGED at {where}: {self.summary}"]
        if isinstance(self.recorded, dict) and isinstance(self.live, dict):
            lines += _diff(self.recorded, self.live)
        else:
            lines.append(f"  recorded: {_compact(self.recorded)}")
            lines.append(f"  live:     {_compact(self.live)}")
        return "\n".join(lines)


@dataclass(slots=True)
class RoundCheck:
    """How one round went when replayed."""

    round: int
    recorded_kind: str
    live_kind: str
    asked: list[str]
    matched: bool
    duration_ms: float
    traceback: str | None = None
    """The traceback of an unexpected exception in the handler or a resolver, if one raised."""


@dataclass(slots=True)
class ReplayReport:
    """What replaying one call found; ``ok`` when every round matched."""

    call_id: str
    method: str
    target: str
    recorded_rounds: int
    rounds: list[RoundCheck] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    divergence: Divergence | None = None
    code_changed: bool = False
    skipped: int | None = None
    """The round replay stopped before, when the journal lacks what it needs to run it."""

    @property
    def ok(self) -> bool:
        return self.divergence is None

    def render(self) -> str:
        plural = "s" if self.recorded_rounds != 1 else ""
        lines = [
            f"Replaying call {self.call_id} ({self.method} {self.target}, "
            f"{self.recorded_rounds} recorded round{plural}) against the live code."
        ]
        lines += [f"warning: {w}" for w in self.warnings]
        for check in self.rounds:
            asked = f", asks {', '.join(check.asked)}" if check.asked else ""
            state = "ok" if check.matched else "DIVERGED"
            lines.append(
                f"round {check.round}: {state} ({check.live_kind}{asked}; "
                f"{check.duration_ms:.1f} ms)"
            )
            if check.traceback:
                verb = "as recorded" if check.recorded_kind == "error" else "not as recorded"
                lines.append(f"  the handler raised ({verb}):")
                lines += ["    " + line for line in check.traceback.rstrip().splitlines()]
        if self.divergence is not None:
            lines.append(self.divergence.render())
            lines.append(
                "The live code does not do what was recorded: calls like this one, in flight when "
                "it is deployed, would go on as shown above. Fix the code, or keep the change "
                "knowingly (and re-record the fixture)."
            )
        elif self.skipped is not None:
            lines.append(
                f"round {self.skipped}: not replayed (see the warning above); the rounds before "
                "it match the record."
            )
        elif len(self.rounds) == 1:
            lines.append("The round matches the record.")
        else:
            lines.append(f"All {len(self.rounds)} rounds match the record.")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()


# --- replaying -----------------------------------------------------------------------------------


def find_handler(app: MCPServer, method: str, target: str) -> Handler:
    """The live handler a recorded call ran; :class:`ReplayError` naming what the app has."""
    handlers: dict[str, Handler]
    if method == "tools/call":
        handlers, role = dict(app.tools), "tool"
    elif method == "prompts/get":
        handlers, role = dict(app.prompts), "prompt"
    elif method == "resources/read":
        found = [*app.resources.values(), *app.resource_templates.values()]
        handlers, role = {h.name: h for h in found}, "resource"
    else:
        raise ReplayError(f"the call was recorded for {method!r}, which replay does not know")
    handler = handlers.get(target)
    if handler is None:
        known = ", ".join(sorted(handlers)) or "none"
        raise ReplayError(
            f"the app has no {role} named {target!r} (it has: {known}); is it the server that "
            "recorded this call?"
        )
    return handler


def detached(app: MCPServer) -> MCPServer:
    """A copy of ``app`` that shares its handlers but reaches no store and notifies nobody.

    Its rounds run without a ledger (nothing claimed, spilled or journaled, even for a resource
    a handler reads with ``ctx.read_resource``), and the notifications a handler sends are
    dropped instead of reaching the app's listeners or the store's bus.
    """
    live = copy.copy(app)
    live.store = None
    live.ledger = None
    live.rounds = RoundRunner(live)

    async def dropped(*args: Any) -> None:
        return None

    for name in ("notify_list_changed", "notify_resource_updated"):
        setattr(live, name, dropped)
    return live


def live_code(app: MCPServer, handler: Handler) -> str:
    """The code fingerprint of the handler as the app runs it now (overrides included)."""
    overrides = app.dependency_overrides
    if not overrides:
        return handler.code_fingerprint
    signature = handler.planned(overrides, overrides.version)
    return code_digest([handler.fn, *(node.fn for node in signature.plan.nodes)])


@dataclass(slots=True)
class _Live:
    """What the live code did in one round."""

    kind: str
    questions: dict[str, Any]
    result: Any = None
    next_state: CallState = field(default_factory=CallState)
    traceback: str | None = None
    protocol_error: str | None = None


async def replay_call(
    app: MCPServer, call: RecordedCall, *, arguments: dict[str, Any] | None = None
) -> ReplayReport:
    """Re-run every recorded round of ``call`` against ``app``; stop at the first divergence.

    ``arguments`` stands in for arguments the server did not record.
    """
    rounds = call.ordered_rounds()
    handler = find_handler(app, call.method, call.target)
    raw = arguments if arguments is not None else call.arguments
    if raw is None:
        if handler.signature.argument_names:
            raise ReplayError(
                f"call {call.call_id} was recorded without its arguments, and {call.target!r} "
                f"takes some ({', '.join(handler.signature.argument_names)}): "
                + HOW_TO_RECORD_ARGUMENTS
            )
        raw = {}
    report = ReplayReport(call.call_id, call.method, call.target, len(rounds))
    _check_code(report, app, handler, rounds)
    live_app = detached(app)
    async with _lifespan(live_app):
        previous = CallState()
        for recorded in rounds:
            checkpoints = dict(previous.checkpoints)
            for earlier in rounds[: recorded.round]:
                checkpoints.update(earlier.checkpoints)
            state = CallState(
                answers=dict(previous.answers), asked=dict(previous.asked), checkpoints=checkpoints
            )
            if _lost_answers(recorded, rounds):
                report.warnings.append(
                    f"round {recorded.round} ended with an error result, and the journal kept "
                    "neither the answers it received nor its once-steps (the engine does not "
                    "record them for a round that fails), so replay stops before it rather than "
                    "guess the answers or run side effects again"
                )
                report.skipped = recorded.round
                break
            started = time.perf_counter()
            live = await _run_round(live_app, handler, call, recorded, raw, state)
            elapsed = (time.perf_counter() - started) * 1000
            divergence = _compare(recorded, live, is_last=recorded is rounds[-1])
            report.rounds.append(
                RoundCheck(
                    recorded.round,
                    recorded.kind,
                    live.kind,
                    list(live.questions),
                    divergence is None,
                    elapsed,
                    live.traceback,
                )
            )
            if divergence is not None:
                report.divergence = divergence
                break
            previous = live.next_state
    return report


def _lost_answers(recorded: RecordedRound, rounds: list[RecordedRound]) -> bool:
    """A failed round after a question, journaled without the answers that round received."""
    if recorded.kind != "error" or recorded.round == 1:
        return False
    asked_before = rounds[recorded.round - 2].questions
    return bool(asked_before) and not recorded.answers and not recorded.checkpoints


def _check_code(
    report: ReplayReport, app: MCPServer, handler: Handler, rounds: list[RecordedRound]
) -> None:
    now = live_code(app, handler)
    recorded = [r.code for r in rounds if r.code]
    if not recorded:
        report.warnings.append(
            "the journal has no code fingerprint for this call, so replay cannot tell whether "
            "the code changed"
        )
        return
    if any(code != now for code in recorded):
        report.code_changed = True
        report.warnings.append(
            f"the code of {handler.name} changed since this call was recorded (recorded "
            f"{recorded[-1]}, live {now}); replaying anyway"
        )
    if len(set(recorded)) > 1:
        changed = [r.round for a, r in itertools.pairwise(rounds) if a.code != r.code]
        report.warnings.append(
            f"the call itself spanned a deploy: round(s) {changed} ran different code than the "
            "round before"
        )


@contextlib.asynccontextmanager
async def _lifespan(app: MCPServer) -> AsyncIterator[None]:
    """The app's lifespan, if it has one: handlers may need what it yields."""
    if app.lifespan is None:
        yield
        return
    async with app.lifespan(app) as value:
        app.lifespan_context = value if value is not None else {}
        yield


async def _run_round(
    app: MCPServer,
    handler: Handler,
    call: RecordedCall,
    recorded: RecordedRound,
    raw_arguments: Any,
    state: CallState,
) -> _Live:
    signature = handler.planned(app.dependency_overrides, app.dependency_overrides.version)
    try:
        arguments = validate_arguments(signature, raw_arguments)
    except InvalidArguments as exc:
        return _failure(handler, str(exc))
    asker = ReplayAsker(
        state, recorded.answers, CAPABILITIES, trust_unsolicited=app.trust_unsolicited_answers
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
    ctx: Context[Any] = Context(app, request, scope)
    verb = _VERBS[handler.role]
    try:
        outcome = await Round(signature, signature.plan, ctx, scope, asker).run(arguments)
    except MCPError as exc:
        return _Live("protocol error", {}, protocol_error=f"{exc.code}: {exc.message}")
    except ToolError as exc:
        return _Live("error", {}, _error_result(f"{verb} {handler.name}: {exc}"))
    except Exception:
        live = _failure(
            handler,
            f"{verb} {handler.name}: an unexpected error occurred; the server log has the details",
        )
        live.traceback = _user_traceback()
        return live
    questions = {key: rendered.request() for key, rendered in asker.pending.items()}
    if isinstance(outcome, Completed):
        result = _wire_result(app, handler, outcome.value, raw_arguments)
        return _Live("complete", questions, result, asker.next_state)
    return _Live("input_required", questions, None, asker.next_state)


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


def _failure(handler: Handler, text: str) -> _Live:
    if handler.role == "tool":
        return _Live("error", {}, _error_result(text))
    return _Live("protocol error", {}, protocol_error=text)


def _error_result(text: str) -> dict[str, Any]:
    return {**error_result(text), "resultType": "complete"}


def _wire_result(app: MCPServer, handler: Handler, value: Any, arguments: Any) -> dict[str, Any]:
    if isinstance(handler, Tool | Prompt):
        result = handler.result(value)
    elif isinstance(handler, Resource):
        uri = handler.uri
        for name, part in (arguments or {}).items():
            uri = uri.replace("{" + str(name) + "}", str(part))
        result = {
            "contents": resource_contents(uri, value, handler.mime_type),
            "ttlMs": app.list_ttl_ms,
            "cacheScope": "public",
        }
    else:  # pragma: no cover - every handler is one of the three
        raise ReplayError(f"cannot build the result of a {handler.role}")
    result["resultType"] = "complete"
    return result


def normalized(value: Any) -> Any:
    """JSON-equal values compare equal: tuples become lists, models become dicts."""
    return json.loads(to_json(value, fallback=str))


def _compare(recorded: RecordedRound, live: _Live, *, is_last: bool) -> Divergence | None:
    if live.protocol_error is not None:
        return Divergence(
            recorded.round,
            "outcome",
            None,
            f"the live round ended with a protocol error instead of {recorded.kind}",
            recorded.kind,
            live.protocol_error,
        )
    was, now = normalized(recorded.questions), normalized(live.questions)
    for key in [*was, *(k for k in now if k not in was)]:
        if key in was and key in now:
            if was[key] != now[key]:
                return Divergence(
                    recorded.round,
                    "question",
                    key,
                    "the live code asks this question differently",
                    was[key],
                    now[key],
                )
        elif key in was:
            return Divergence(
                recorded.round,
                "question",
                key,
                f"the live code no longer asks this question (the round ends {live.kind})",
                was[key],
                None,
            )
        elif key in recorded.answers:
            return Divergence(
                recorded.round,
                "question",
                key,
                "the recorded answer was not accepted: the live question differs from the one it "
                "answered, or the answer no longer fits it; the live code asks again",
                {"answer": recorded.answers[key]},
                now[key],
            )
        else:
            return Divergence(
                recorded.round,
                "question",
                key,
                "the live code asks a question the recorded call was not asked",
                None,
                now[key],
            )
    if recorded.kind != live.kind:
        return Divergence(
            recorded.round,
            "outcome",
            None,
            f"the round ends {live.kind}, not {recorded.kind}",
            recorded.kind,
            live.kind,
        )
    if is_last and recorded.kind != "input_required":
        was_result, now_result = normalized(recorded.result), normalized(live.result)
        if was_result != now_result:
            return Divergence(
                recorded.round,
                "result",
                None,
                "the live result differs from the recorded one",
                was_result,
                now_result,
            )
    return None


def _compact(value: Any, limit: int = 400) -> str:
    text = "(nothing)" if value is None else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _diff(recorded: Any, live: Any) -> list[str]:
    a = json.dumps(recorded, indent=2, ensure_ascii=False, sort_keys=True).splitlines()
    b = json.dumps(live, indent=2, ensure_ascii=False, sort_keys=True).splitlines()
    diff = difflib.unified_diff(a, b, "recorded", "live", lineterm="", n=2)
    return ["  " + line for line in diff]


# --- reading a call: the timeline ------------------------------------------------------------


def when(ts: float | None) -> str:
    if ts is None:
        return "unknown time"
    moment = datetime.fromtimestamp(ts, UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d} UTC"


def timeline(call: RecordedCall) -> str:
    """A readable account of a call: each round's questions, answers, checkpoints and result."""
    rounds = call.rounds
    first, last = rounds[0], rounds[-1]
    plural = "s" if len(rounds) != 1 else ""
    lines = [
        f"Call {call.call_id}: {call.method} {call.target}, {len(rounds)} round{plural}, "
        f"{_state_of(last.kind)}",
        f"  started   {when(first.ts)}",
    ]
    arguments = call.arguments
    lines.append(
        "  arguments "
        + (
            json.dumps(arguments, ensure_ascii=False)
            if arguments is not None
            else "(not recorded: serve with ENGINE_JOURNAL_ARGUMENTS=1 to record them)"
        )
    )
    codes = list(dict.fromkeys(r.code for r in rounds if r.code))
    if codes:
        lines.append(f"  code      {' then '.join(codes)}")
    for recorded in rounds:
        offset = (
            f"+{recorded.ts - first.ts:.3f} s"
            if recorded.ts is not None and first.ts is not None
            else "?"
        )
        took = f"{recorded.duration_ms:.1f} ms" if recorded.duration_ms is not None else "?"
        lines.append("")
        lines.append(
            f"Round {recorded.round}  {offset}  replica {recorded.replica or '?'}  {took}  "
            f"→ {recorded.kind}"
        )
        for key, answer in recorded.answers.items():
            lines.append(f"  answer  {key}: {_compact(answer, 300)}")
        for key, value in recorded.checkpoints.items():
            lines.append(f"  once    {key} = {_checkpoint(value)}")
        for key, request in recorded.questions.items():
            lines += [f"  asks    {key}: " + describe_question(request)[0]]
            lines += ["          " + line for line in describe_question(request)[1:]]
        if recorded.kind != "input_required":
            lines += ["  " + line for line in describe_result(recorded.result)]
    return "\n".join(lines)


def _state_of(kind: str) -> str:
    return {
        "input_required": "waiting for an answer (or abandoned)",
        "complete": "complete",
        "error": "ended with an error result",
    }.get(kind, kind)


def _checkpoint(value: Any) -> str:
    if isinstance(value, list) and len(value) == 2 and value[0] == 1:
        return _compact(value[1], 200)
    if isinstance(value, list) and len(value) == 3 and value[0] == 0:
        return f"(asked {value[1]}) " + _compact(value[2], 200)
    return _compact(value, 200)


def describe_question(request: Any) -> list[str]:
    """A question in a few lines: its method, its message, its form fields."""
    if not isinstance(request, dict):
        return [_compact(request)]
    method = str(request.get("method"))
    params = request.get("params") if isinstance(request.get("params"), dict) else {}
    assert isinstance(params, dict)
    if method == "elicitation/create":
        mode = params.get("mode", "form")
        lines = [f"{method} ({mode}) {params.get('message', '')!r}"]
        if mode == "url":
            lines.append(f"url {params.get('url')}")
        schema = params.get("requestedSchema")
        if isinstance(schema, dict):
            required = set(schema.get("required") or [])
            for name, prop in (schema.get("properties") or {}).items():
                lines.append("field " + describe_field(name, prop, name in required))
        return lines
    if method == "sampling/createMessage":
        lines = [f"{method} (maxTokens {params.get('maxTokens')})"]
        if params.get("systemPrompt"):
            lines.append(f"system: {params['systemPrompt']!r}")
        for message in params.get("messages") or []:
            content = message.get("content") if isinstance(message, dict) else None
            text = content.get("text") if isinstance(content, dict) else None
            role = message.get("role") if isinstance(message, dict) else "?"
            lines.append(f"{role}: {text!r}" if text is not None else f"{role}: {content}")
        return lines
    if not params:
        return [method]
    return [f"{method} {_compact(params, 300)}"]


def describe_field(name: str, prop: Any, required: bool) -> str:
    """``name (type, required, default x) — description``, for forms on the terminal."""
    if not isinstance(prop, dict):
        return name
    kind = prop.get("type", "any")
    options = field_options(prop)
    parts = [f"one of {', '.join(map(str, options))}" if options else str(kind)]
    if required:
        parts.append("required")
    elif prop.get("default") is None:
        parts.append("optional")
    else:
        parts.append(f"default {json.dumps(prop['default'], ensure_ascii=False)}")
    text = f"{name} ({', '.join(parts)})"
    described = str(prop.get("description") or prop.get("title") or "")
    if not described or described.lower().replace(" ", "_") == name.lower():
        return text  # a title pydantic made from the name says nothing new
    return f"{text} — {described}"


def field_options(prop: Mapping[str, Any]) -> list[Any]:
    """The allowed values of an enum field (plain, titled ``oneOf``, or a list of enums)."""
    if isinstance(prop.get("enum"), list):
        return list(prop["enum"])
    for choices in (prop.get("oneOf"), prop.get("anyOf")):
        if isinstance(choices, list) and all(isinstance(c, dict) and "const" in c for c in choices):
            return [c["const"] for c in choices]
    items = prop.get("items")
    if prop.get("type") == "array" and isinstance(items, dict):
        return field_options(items)
    return []


def describe_result(result: Any) -> list[str]:
    """A final result in a few lines: its text, its structured content, whether it failed."""
    if not isinstance(result, dict):
        return [f"result  {_compact(result)}"]
    label = "error   " if result.get("isError") else "result  "
    lines: list[str] = []
    for block in result.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "text":
            for line in str(block.get("text", "")).splitlines() or [""]:
                lines.append(label + line)
                label = "        "
        else:
            lines.append(label + _compact(block, 200))
            label = "        "
    if "structuredContent" in result:
        lines.append("structured " + _compact(result["structuredContent"], 300))
    if "messages" in result or "contents" in result:
        rest = {k: v for k, v in result.items() if k not in ("resultType", "_meta")}
        lines.append(label + _compact(rest, 400))
    return lines or [label + "(empty)"]


__all__ = [
    "FORMAT",
    "Divergence",
    "RecordedCall",
    "RecordedRound",
    "ReplayError",
    "ReplayReport",
    "RoundCheck",
    "describe_question",
    "describe_result",
    "find_handler",
    "load_call",
    "load_fixture",
    "replay_call",
    "timeline",
]
