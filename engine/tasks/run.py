"""One run of a task's body: one more round of its call, on the replica that holds the task.

The round runs from the record as rounds run from a token: the arguments validated again, the
resolvers walked, recorded answers and the answers just given used, then the body. A
checkpoint (a ``once=True`` resolver, ``ctx.once``) is written to the record before the body
goes on, so a replica that takes the task over does not repeat it. What the round comes to
becomes the task's status: a result, an error, or questions for the client (the task then
waits in the store; nothing of it stays in a process).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio.lowlevel

from engine._internal.budgets import over_budget
from engine._internal.json_bytes import dumps
from engine._internal.metrics import Metrics
from engine.calls.execute import Outcome, execute_round
from engine.calls.reply import CallRequest, ReplyKind, RoundReply
from engine.calls.runner import RoundRunner
from engine.errors import INVALID_PARAMS, OVER_BUDGET, MCPError
from engine.handlers.results import error_result
from engine.handlers.tool import Tool
from engine.questions.answers import StatelessAnswers
from engine.scope import RequestScope
from engine.state.call import CallState
from engine.store_services.journal_writer import JournalWriter
from engine.tasks.lease import Lease
from engine.tasks.record import Status, TaskRecord
from stores import StoreUnavailable

log = logging.getLogger("engine.tasks")


@dataclass(slots=True)
class RunContext:
    """What a run reaches of its server."""

    tools: Mapping[str, Tool]
    runner: RoundRunner
    """Its hooks, overrides and token settings, and the journal event of a round."""
    journal: JournalWriter
    changed: Callable[[TaskRecord], Awaitable[None]]
    """Told of each status the run writes (status notifications)."""
    metrics: Metrics
    max_result_bytes: int
    """A result larger than this, as JSON, fails the task (``max_task_result_bytes``)."""


async def run_body(lease: Lease, context: RunContext) -> None:
    """Run the task's body once, and write what it came to, unless the hold is lost first."""
    record = lease.record
    started = time.perf_counter()
    tool = context.tools.get(record.target)
    if tool is None:  # the tool was removed, or this replica serves other code
        error = MCPError(INVALID_PARAMS, f"Unknown tool: {record.target}")
        await _finish(lease, context, None, _failed(error), started)
        return
    state = CallState.decode(record.state)
    answers = StatelessAnswers(
        state,
        record.answers,
        record.capabilities,
        context.runner.tokens.trust_unsolicited_answers,
    )

    async def keep_checkpoint(key: str) -> None:
        kept = CallState(
            {**state.answers, **answers.next_state.answers},
            dict(state.asked),
            dict(answers.next_state.checkpoints),
        )
        if not await lease.keep(f"checkpoint {key!r}", state=kept.encode()):
            log.warning(
                "task %s: step %r ran, but the hold was lost before its checkpoint was kept: "
                "where the task is taken over, the step runs again",
                record.task_id,
                key,
            )
            await anyio.lowlevel.checkpoint()  # the cancelled run stops here

    answers.on_checkpoint = keep_checkpoint
    answers.before_once = lease.confirm
    request = task_request(record)
    scope = dataclasses.replace(
        request.scope,
        meta={"progressToken": record.task_id},
        notify=_ProgressAsStatus(lease, context, record.poll_ms / 1000).notify,
    )
    protocol_error: MCPError | None = None
    with lease.scope:
        try:
            executed = await execute_round(
                tool,
                record.arguments,
                scope,
                record.task_id,
                record.round_no,
                state,
                answers,
                hooks=context.runner.hooks,
                overrides=context.runner.overrides,
                convert=tool.result,
            )
        except MCPError as exc:
            protocol_error = exc
    if lease.lost or lease.scope.cancel_called:
        return
    if protocol_error is not None:
        outcome, kind = _failed(protocol_error), "failed"
    elif executed.outcome is Outcome.SUSPENDED:
        outcome, kind = _asking(record, answers), ReplyKind.INPUT_REQUIRED.value
    elif executed.outcome is Outcome.HANDLER_ASKED:
        log.error(
            "tool %r returned an InputRequiredResult from a task's body, which a task cannot "
            "carry; in a task, ask with ctx.elicit() / ctx.sample() / ctx.list_roots() (the task "
            "waits for the answer) or a Resolve(...) dependency",
            tool.name,
        )
        answers.next_state.handler = None
        text = (
            f"Error executing tool {tool.name}: it asked for input by returning an "
            "InputRequiredResult, which a task cannot carry"
        )
        outcome = {
            "status": Status.COMPLETED,
            "result": {**error_result(text), "resultType": "complete"},
        }
        kind = ReplyKind.ERROR.value
    else:
        if executed.unexpected is not None:
            log.error("tool %r failed", tool.name, exc_info=executed.unexpected)
        value = executed.value if executed.outcome is Outcome.COMPLETE else None
        result = value if value is not None else error_result(executed.error or "error")
        outcome = {"status": Status.COMPLETED, "result": {**result, "resultType": "complete"}}
        kind = (ReplyKind.COMPLETE if value is not None else ReplyKind.ERROR).value
        too_large = _too_large(outcome["result"], context)
        if too_large is not None:
            log.warning("task %s of tool %r failed: %s", record.task_id, tool.name, too_large)
            outcome, kind = _failed(too_large), "failed"
    outcome["state"] = answers.next_state.encode()
    await _finish(lease, context, (tool, request, answers, kind), outcome, started)


class _ProgressAsStatus:
    """A task's body has no request to send ``notifications/progress`` on: what it reports
    becomes the task's ``statusMessage``, which ``tasks/get`` shows and status notifications
    carry to every replica. A write of the task each, at most one a poll interval (the others
    are dropped: a client polling sees no more often anyway)."""

    __slots__ = ("context", "every", "lease", "written")

    def __init__(self, lease: Lease, context: RunContext, every: float) -> None:
        self.lease = lease
        self.context = context
        self.every = every
        self.written = -math.inf

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        if method != "notifications/progress":
            return  # log messages of a body reach the server's log only
        now = time.monotonic()
        if now - self.written < self.every:
            return
        self.written = now
        try:
            kept = await self.lease.write(message=progress_text(params), updated=time.time())
        except StoreUnavailable:
            return  # the next report, or the outcome, is written once the store answers
        if kept:
            await self.context.changed(self.lease.record)


def progress_text(params: Mapping[str, Any]) -> str:
    """``counted 2 (2/5)``: a progress report as a status message."""
    done, total, message = params.get("progress"), params.get("total"), params.get("message")
    amount = f"{done:g}" if isinstance(done, int | float) else "?"
    if isinstance(total, int | float) and total:
        amount = f"{amount}/{total:g}"
    return f"{message} ({amount})" if isinstance(message, str) and message else amount


def _too_large(result: dict[str, Any], context: RunContext) -> MCPError | None:
    """The failure of a task whose result is over ``max_task_result_bytes``: kept, every
    ``tasks/get`` of it would carry it whole, to any number of clients."""
    size = len(dumps(result))
    limit = context.max_result_bytes
    if size <= limit:
        return None
    return over_budget(
        context.metrics,
        OVER_BUDGET,
        "max_task_result_bytes",
        limit,
        f"The task's result is {size} bytes as JSON, more than a task keeps; have the tool "
        "return less (a resource link to the data, or a page of it), or raise the limit",
    )


def _failed(error: MCPError) -> dict[str, Any]:
    return {"status": Status.FAILED, "error": error.to_error(), "message": error.message}


def _asking(record: TaskRecord, answers: StatelessAnswers) -> dict[str, Any]:
    """The task's new questions, each under a key it never used before."""
    issued = list(record.issued)
    questions: dict[str, str] = {}
    requests: dict[str, Any] = {}
    for key, rendered in answers.pending.items():
        wire = record.wire_key(key, issued)
        issued.append(wire)
        questions[wire] = key
        requests[wire] = rendered.request()
    return {
        "status": Status.INPUT_REQUIRED,
        "questions": questions,
        "requests": requests,
        "issued": issued,
    }


async def _finish(
    lease: Lease,
    context: RunContext,
    ran: tuple[Tool, CallRequest, StatelessAnswers, str] | None,
    outcome: dict[str, Any],
    started: float,
) -> None:
    """Write the run's outcome as the task's status; then journal it and tell listeners."""
    outcome.setdefault("message", None)  # what the body reported while working is over
    # Tried until the store takes or refuses it: a run that stopped here would be run again.
    written = await lease.keep(
        "its outcome", **outcome, updated=time.time(), owner=None, lease_until=0.0, answers={}
    )
    if not written:
        return
    record = lease.record
    context.metrics.inc("engine_task_runs_total", status=record.status.value)
    await context.changed(record)
    if ran is not None:
        tool, request, answers, kind = ran
        await journal_run(context, tool, record, request, kind, answers, started)


async def journal_run(
    context: RunContext,
    tool: Tool,
    record: TaskRecord,
    request: CallRequest,
    kind: str,
    answers: StatelessAnswers | None,
    started: float,
) -> None:
    """Journal what a task's round came to, as a round's event (of ``kind``, as a round in
    rounds would be, or ``failed``, ``cancelled``): replay and ``show`` read a task as the
    rounds of its call. ``answers`` is ``None`` for a cancel, which ran nothing."""
    journal = context.journal
    if not journal.journals(record.task_id):
        return
    status = record.status
    response: Any = {"resultType": status.value}
    if status is Status.COMPLETED:
        response = record.result
    elif status is Status.INPUT_REQUIRED:
        response = {"resultType": "input_required", "inputRequests": record.requests}
    elif status is Status.FAILED:
        response = {"error": record.error}
    reply = RoundReply(
        ReplyKind.COMPLETE,
        record.result,
        record.task_id,
        record.round_no,
        record.requests or None,
        trace=answers,
    )
    event = context.runner.journal_event(tool, request, reply, dumps(response), started)
    event["kind"] = kind
    if answers is not None:  # every checkpoint: a run taken over kept those of the one before
        event["checkpoints"] = dict(answers.next_state.checkpoints)
    event["task"] = status.value
    # In the clear, for a reader of the journal: the hold this run had (its fence), and how
    # many times the task was taken over from a run that neither finished nor gave it back.
    event["hold"] = record.fence
    event["takeovers"] = record.takeovers
    await journal.record(record.task_id, event)


def task_request(record: TaskRecord) -> CallRequest:
    """The request a run of the task serves: the one that made it, as it is recorded."""
    scope = RequestScope(None, "tools/call", record.protocol, record.capabilities, None, {}, None)
    return CallRequest(
        "tools/call", record.target, record.arguments, record.answers or None, None, scope
    )


__all__ = ["RunContext", "journal_run", "progress_text", "run_body", "task_request"]
