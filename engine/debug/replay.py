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

The recorded call is :mod:`engine.debug.journal`; running one round live is
:mod:`engine.debug.live_round`. This module walks the rounds, compares, and reports; tests reach it
through :mod:`engine.testing` (``replay``, ``replay_call``, ``load_fixture``).
"""

from __future__ import annotations

import difflib
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import to_json

from engine._internal.inert import inert, inert_json
from engine.app import MCPServer
from engine.debug.journal import RecordedCall, RecordedRound, ReplayError, load_fixture
from engine.debug.live_round import Detached, LiveRound, lifespan, run_live_round
from engine.debug.render import compact
from engine.handlers.base import Handler
from engine.handlers.code_fingerprint import bytecode_digest, code_digest
from engine.state.call import CallState

HOW_TO_RECORD_ARGUMENTS = (
    "record them by serving with journal_arguments=True (ENGINE_JOURNAL_ARGUMENTS=1, the "
    "default), or "
    "give them to replay: --args '{...}' on the command line, arguments={...} in Python"
)


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
        return "\n".join(self.lines())

    def lines(self) -> list[str]:
        """The divergence as lines to print, each inert."""
        where = f"round {self.round}" + (f", question {self.key!r}" if self.key else "")
        lines = [f"DIVERGED at {where}: {self.summary}"]
        if isinstance(self.recorded, dict) and isinstance(self.live, dict):
            lines += _diff(self.recorded, self.live)
        else:
            lines.append(f"  recorded: {compact(self.recorded)}")
            lines.append(f"  live:     {compact(self.live)}")
        return [inert(line) for line in lines]


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
        """The report as a terminal shows it: every line inert (a recorded value or a traceback
        may hold any character)."""
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
            lines += self.divergence.lines()
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
        return "\n".join(inert(line) for line in lines)

    def to_document(self) -> dict[str, Any]:
        """The report as JSON-compatible data (``replay --json``): what :meth:`render` says,
        with the divergence's recorded and live values whole."""
        divergence = self.divergence
        return {
            "call_id": self.call_id,
            "method": self.method,
            "target": self.target,
            "ok": self.ok,
            "recorded_rounds": self.recorded_rounds,
            "code_changed": self.code_changed,
            "warnings": list(self.warnings),
            "rounds": [
                {
                    "round": check.round,
                    "recorded_kind": check.recorded_kind,
                    "live_kind": check.live_kind,
                    "asked": list(check.asked),
                    "matched": check.matched,
                    "duration_ms": check.duration_ms,
                    "traceback": check.traceback,
                }
                for check in self.rounds
            ],
            "divergence": None
            if divergence is None
            else {
                "round": divergence.round,
                "what": divergence.what,
                "key": divergence.key,
                "summary": divergence.summary,
                "recorded": normalized(divergence.recorded),
                "live": normalized(divergence.live),
            },
            "skipped": self.skipped,
            "report": self.render(),
        }

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


def live_code(app: MCPServer, handler: Handler) -> str:
    """The code fingerprint of the handler as the app runs it now (overrides included)."""
    if not app.dependency_overrides:
        return handler.code_fingerprint
    return code_digest(_live_functions(app, handler))


def _live_functions(app: MCPServer, handler: Handler) -> list[Callable[..., Any]]:
    overrides = app.dependency_overrides
    return handler.functions(handler.planned(overrides, overrides.version))


async def replay_call(
    app: MCPServer, call: RecordedCall, *, arguments: dict[str, Any] | None = None
) -> ReplayReport:
    """Re-run every recorded round of ``call`` against ``app``; stop at the first divergence.

    ``arguments`` stands in for arguments the server did not record (a ``Redacted()`` one, or
    all of them), and overrides recorded ones.
    """
    rounds = call.ordered_rounds()
    handler = find_handler(app, call.method, call.target)
    _refuse_truncated(call, rounds)
    raw = call.arguments
    if arguments is not None:
        raw = {**raw, **arguments} if isinstance(raw, dict) else arguments
    _refuse_redacted(call, rounds, raw)
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
    detached = Detached(app)
    async with lifespan(app):
        previous = CallState()
        for recorded in rounds:
            checkpoints = dict(previous.checkpoints)
            for earlier in rounds[: recorded.round]:
                checkpoints.update(earlier.checkpoints)
            state = CallState(
                answers=dict(previous.answers),
                asked=dict(previous.asked),
                checkpoints=checkpoints,
                handler=previous.handler,
            )
            if recorded.kind == "cancelled":
                report.warnings.append(
                    f"round {recorded.round}: the task was cancelled there, before its run "
                    "ended; there is nothing more to replay"
                )
                report.skipped = recorded.round
                break
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
            live = await run_live_round(detached, handler, call, recorded, raw, state)
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


def _refuse_truncated(call: RecordedCall, rounds: list[RecordedRound]) -> None:
    """A round journaled without part of its payload cannot be replayed exactly: say so."""
    for recorded in rounds:
        if recorded.truncated:
            parts = ", ".join(f"{name}: {size} bytes" for name, size in recorded.truncated.items())
            raise ReplayError(
                f"round {recorded.round} of call {call.call_id} was journaled TRUNCATED ({parts} "
                "left out, over journal_max_event_bytes), so it cannot be replayed exactly and "
                "is not replayed; serve with a larger journal_max_event_bytes "
                "(ENGINE_JOURNAL_MAX_EVENT_BYTES) to record such calls whole"
            )


def _refuse_redacted(call: RecordedCall, rounds: list[RecordedRound], raw: Any) -> None:
    """Arguments marked ``Redacted()`` were never journaled: name them and how to give them."""
    redacted = sorted({name for recorded in rounds for name in recorded.redacted})
    given = raw if isinstance(raw, dict) else {}
    missing = [name for name in redacted if name not in given]
    if missing:
        names = ", ".join(repr(name) for name in missing)
        example = json.dumps({name: "..." for name in missing})
        raise ReplayError(
            f"call {call.call_id}: argument(s) {names} of {call.target!r} are marked Redacted() "
            f"and were never journaled; give them to replay: --args '{example}' on the command "
            f"line, arguments={example} in Python (the recorded arguments fill in the rest)"
        )


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
        # rounds journaled before fingerprints followed the syntax tree carry the bytecode's
        before = bytecode_digest(_live_functions(app, handler))
        report.code_changed = any(code not in (now, before) for code in recorded)
    if report.code_changed:
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


def normalized(value: Any) -> Any:
    """JSON-equal values compare equal: tuples become lists, models become dicts."""
    return json.loads(to_json(value, fallback=str))


def _compare(recorded: RecordedRound, live: LiveRound, *, is_last: bool) -> Divergence | None:
    if live.protocol_error is not None and recorded.kind == "failed":
        return None  # a task's run that ended with a JSON-RPC error, as recorded
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
    if is_last and recorded.kind not in ("input_required", "task"):
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


def _diff(recorded: Any, live: Any) -> list[str]:
    a = inert_json(recorded, indent=2, sort_keys=True).split("\n")
    b = inert_json(live, indent=2, sort_keys=True).split("\n")
    diff = difflib.unified_diff(a, b, "recorded", "live", lineterm="", n=2)
    return ["  " + line for line in diff]


__all__ = [
    "Divergence",
    "ReplayError",
    "ReplayReport",
    "RoundCheck",
    "find_handler",
    "live_code",
    "load_fixture",
    "normalized",
    "replay_call",
]
