"""``Tasks``: the tasks of one server, made from rounds, answered for on any replica, their
bodies run here under leases.

A round whose call becomes a task writes the task (working, held by this replica) before its
``CreateTaskResult`` goes out, so a ``tasks/get`` anywhere finds it; the body starts once that
round is kept. ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` read and write the record in
the store, so they work on any replica: an update that answers the last question takes the task
and runs the body where it arrived; a cancel reaches the replica that runs it over the bus. Each
replica renews the holds of the bodies it runs, and takes over the tasks whose holds lapsed (their
replica died) from the store's due index.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

import anyio
from anyio.abc import TaskGroup

from engine._internal.budgets import ExpiringCounts, RateLimit, over_budget, principal_key
from engine._internal.metrics import Metrics
from engine._internal.notify import Notify
from engine._internal.random_pool import random_bytes
from engine.auth.provider import require_scopes
from engine.calls.reply import CallRequest, ReplyKind, RoundReply, TaskStart
from engine.calls.runner import RoundRunner
from engine.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    OVER_BUDGET,
    InsufficientScope,
    MCPError,
)
from engine.fleet.bus import Bus
from engine.handlers.task_policy import declares_tasks, missing_extension
from engine.handlers.tool import Tool
from engine.questions.answers import AnswerSource
from engine.scope import RequestScope
from engine.settings import TaskSettings
from engine.state.call import CallState
from engine.state.claims import principal_tag
from engine.store_services.journal_writer import JournalWriter
from engine.tasks.lease import WRITE_ATTEMPTS, Lease
from engine.tasks.record import TERMINAL, Status, TaskRecord
from engine.tasks.record_store import TaskRecords, changed
from engine.tasks.run import RunContext, journal_run, run_body, task_request
from engine.tasks.wire import detailed, task_fields
from stores import StoreUnavailable

log = logging.getLogger("engine.tasks")

RENEWALS_PER_LEASE = 4
"""A held task is renewed this many times a lease, so a renewal or two may fail or come late
before the hold lapses under a live body."""
SWEEPS_PER_LEASE = 2
"""Looks at the due index this many times a lease, each at a random point of its interval (so
the replicas of a fleet do not all look at once)."""
DUE_BATCH = 100
"""Lapsed tasks one look takes at most."""
MAX_BACKOFF_DOUBLINGS = 4
"""Looks at the due index that failed in a row double the wait before the next, this often at
most."""
WATCH_SECONDS = 25.0
"""How long a watching ``tasks/get`` waits for its task to stop working, at most: under the
idle timeouts of the proxies between a client and a replica."""
STATUS_NOTIFICATION = "notifications/tasks/status"

Watcher = Callable[[], Awaitable[None]]


class Tasks:
    """The tasks of one server (which has a store)."""

    def __init__(
        self,
        *,
        tools: Mapping[str, Tool],
        runner: RoundRunner,
        records: TaskRecords,
        journal: JournalWriter,
        bus: Bus,
        settings: TaskSettings,
        metrics: Metrics,
    ) -> None:
        self.records = records
        self.metrics = metrics
        self.runner = runner
        self.bus = bus
        self.settings = settings
        self.held: dict[str, Lease] = {}
        """The tasks whose bodies this replica runs (or is about to), by id."""
        self.context = RunContext(
            tools, runner, journal, self._changed, metrics, settings.max_result_bytes
        )
        self.watchers: dict[str, set[Watcher]] = {}
        """Status notifications wanted in this process, by task id."""
        self._group: TaskGroup | None = None
        self._limiter = anyio.CapacityLimiter(settings.max_running)
        self._kept = ExpiringCounts(settings.ttl)
        """Tasks made here and not past their TTL, by principal key."""
        self._creations = RateLimit(settings.max_creations_per_minute)
        bus.on("task", self._on_bus)

    @property
    def offered(self) -> bool:
        """Whether a tool of the server runs as a task (then ``server/discover`` says so)."""
        return any(tool.task is not None for tool in self.context.tools.values())

    # --- tasks made by rounds ---------------------------------------------------------------

    async def create(
        self,
        tool: Tool,
        request: CallRequest,
        call_id: bytes,
        round_no: int,
        state: CallState,
        principal: str | None,
    ) -> RoundReply:
        """Write the task of this round's call, held by this replica; the reply that hands it
        to the client starts its body once the round is kept (``RoundReply.launch``)."""
        self._admit(principal_key(principal, request.scope.client))
        now = time.time()
        owner = random_bytes(16)
        scope = request.scope
        taken = time.monotonic()
        record = TaskRecord(
            task_id=call_id.hex(),
            target=tool.name,
            arguments=request.arguments,
            capabilities=scope.capabilities,
            protocol=scope.protocol_version or "",
            principal=None if principal is None else principal_tag(principal),
            created=now,
            ttl=self.settings.ttl,
            poll_ms=max(1, round(self.settings.poll_interval * 1000)),
            state=state.encode(),
            round_no=round_no + 1,
            updated=now,
            owner=owner,
            fence=1,
            scopes=tool.scopes,
        )
        if not await self.records.save(record, due_in=self.settings.lease):
            raise MCPError(INTERNAL_ERROR, f"Task {record.task_id} exists already; call again")
        lease = Lease(self.records, record, owner, self.settings.lease, taken=taken)
        reply = RoundReply(ReplyKind.TASK, task_fields(record), record.task_id, round_no)
        reply.launch = partial(self.launch, lease)
        return reply

    def _admit(self, key: str) -> None:
        """Count one more task of ``key``, or refuse it at a budget (-32031)."""
        settings, now = self.settings, time.monotonic()
        if self._kept.total(now) >= settings.max_per_replica:
            raise over_budget(
                self.metrics,
                OVER_BUDGET,
                "max_tasks_per_replica",
                settings.max_per_replica,
                "This replica keeps as many tasks as it may; call again later, or on another "
                "replica",
            )
        held = self._kept.held(key, now)
        if held >= settings.max_per_principal:
            raise over_budget(
                self.metrics,
                OVER_BUDGET,
                "max_tasks_per_principal",
                settings.max_per_principal,
                f"You have {held} tasks kept on this replica, as many as one principal may; "
                f"call without a task, or wait for older tasks to expire (task_ttl "
                f"{settings.ttl:g} s)",
            )
        if not self._creations.allow(key, now):
            raise over_budget(
                self.metrics,
                OVER_BUDGET,
                "max_task_creations_per_minute",
                settings.max_creations_per_minute,
                "You made tasks faster than one principal may on this replica; wait a few "
                "seconds and call again",
            )
        self._kept.take(key, now)

    # --- tasks/get, tasks/update, tasks/cancel ---------------------------------------------

    async def get(self, task_id: str, scope: RequestScope) -> dict[str, Any]:
        """The task as ``tasks/get`` shows it."""
        return detailed(await self._visible(task_id, scope))

    async def update(self, task_id: str, responses: dict[str, Any], scope: RequestScope) -> None:
        """Take the answers to the task's outstanding questions (others are ignored). Once none
        is left, the task works again: this replica takes it and runs its body."""
        for _ in range(WRITE_ATTEMPTS):
            record = await self._visible(task_id, scope)
            if record.status is not Status.INPUT_REQUIRED:
                return
            given = {wire: answer for wire, answer in responses.items() if wire in record.questions}
            if not given:
                return
            answers = dict(record.answers)
            for wire, answer in given.items():
                answers[record.questions[wire]] = answer
            questions = {w: k for w, k in record.questions.items() if w not in given}
            requests = {w: r for w, r in record.requests.items() if w not in given}
            now = time.time()
            if questions:
                draft = changed(
                    record, questions=questions, requests=requests, answers=answers, updated=now
                )
                if await self.records.save(draft, due_in=None):
                    await self._changed(draft)
                    return
                continue
            owner = random_bytes(16)
            draft = changed(
                record,
                status=Status.WORKING,
                questions={},
                requests={},
                answers=answers,
                updated=now,
                owner=owner,
                fence=record.fence + 1,
                round_no=record.round_no + 1,
            )
            taken = time.monotonic()
            if await self.records.save(draft, due_in=self.settings.lease):
                self.launch(Lease(self.records, draft, owner, self.settings.lease, taken=taken))
                await self._changed(draft)
                return
        raise _busy(task_id)

    async def cancel(self, task_id: str, scope: RequestScope) -> None:
        """Cancel the task, unless it has ended; its body, wherever it runs, is cancelled."""
        for _ in range(WRITE_ATTEMPTS):
            record = await self._visible(task_id, scope)
            if record.status in TERMINAL:
                return
            draft = changed(
                record,
                status=Status.CANCELLED,
                message="Cancelled at the client's request",
                updated=time.time(),
                owner=None,
                questions={},
                requests={},
            )
            if await self.records.save(draft, due_in=None):
                break
        else:
            raise _busy(task_id)
        await self.bus.publish("task", "cancel", task_id)
        await self._changed(draft)
        tool = self.context.tools.get(draft.target)
        if tool is not None:
            request = task_request(draft)
            await journal_run(
                self.context, tool, draft, request, "cancelled", None, time.perf_counter()
            )

    async def watch_get(
        self, task_id: str, scope: RequestScope, notify: Notify, wait: float = WATCH_SECONDS
    ) -> dict[str, Any]:
        """``tasks/get`` that waits while the task works: each change of its status is sent as
        ``notifications/tasks/status`` meanwhile; the task as it is once it stops working (or
        after ``wait`` seconds)."""
        record = await self._visible(task_id, scope)
        if record.status is not Status.WORKING:
            return detailed(record)
        changed = anyio.Event()

        async def woken() -> None:
            changed.set()

        with self.watching(task_id, woken), anyio.move_on_after(wait):
            while record.status is Status.WORKING:
                await changed.wait()
                changed = anyio.Event()
                fresh = await self.records.load(task_id)
                if fresh is None:
                    break
                if (fresh.status, fresh.updated) != (record.status, record.updated):
                    await notify(STATUS_NOTIFICATION, detailed(fresh))
                record = fresh
        return detailed(record)

    async def reachable(self, task_id: str, scope: RequestScope) -> bool:
        """Whether the request may hear about the task: False for one that does not exist or
        that another principal made; `InsufficientScope` when the request's token lacks the
        scopes its call needed."""
        try:
            await self._visible(task_id, scope)
        except InsufficientScope:
            raise
        except MCPError:
            return False
        return True

    def watching(self, task_id: str, watcher: Watcher) -> contextlib.AbstractContextManager[None]:
        """Call ``watcher`` whenever the task's status changes, on any replica, while in the
        block."""
        return _Watching(self.watchers, task_id, watcher)

    async def _visible(self, task_id: str, scope: RequestScope) -> TaskRecord:
        """The task, if it exists and the request's principal made it (-32602 otherwise), and
        the request's token has the scopes its call needed (`InsufficientScope` otherwise)."""
        record = await self.records.load(task_id)
        if record is not None and _same_principal(record.principal, self.runner.principal(scope)):
            require_scopes(scope.access_token, self._needed(record))
            return record
        raise MCPError(
            INVALID_PARAMS,
            f"Failed to retrieve task: Task not found. It may have expired (tasks are kept "
            f"{self.settings.ttl:g} s from their creation) or have been created by someone else",
            {"taskId": task_id},
        )

    def _needed(self, record: TaskRecord) -> tuple[str, ...]:
        """The scopes a request reaching the task needs: those its call needed, sealed in its
        record, and those its tool declares now (all of them, for a record written before
        records kept scopes)."""
        tool = self.context.tools.get(record.target)
        sealed = record.scopes
        if tool is None or not tool.scopes:
            return sealed
        return (*sealed, *(s for s in tool.scopes if s not in sealed))

    # --- running bodies ---------------------------------------------------------------------

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """While the server runs: the bodies of held tasks, their renewals, and the takeover
        of lapsed ones. On the way out, the holds still here are given back, so another
        replica takes those tasks at once instead of after a lease."""
        try:
            async with anyio.create_task_group() as group:
                self._group = group
                group.start_soon(self._renew_held)
                group.start_soon(self._take_over_lapsed)
                task_status.started()
        finally:
            self._group = None
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                await self._give_back()

    def launch(self, lease: Lease) -> None:
        """Run the held task's body here, when a slot is free (its hold is renewed meanwhile)."""
        group = self._group
        if group is None:
            log.warning(
                "task %s was made while tasks do not run here; a running replica takes it over "
                "once its hold lapses",
                lease.task_id,
            )
            return
        self.held[lease.task_id] = lease
        group.start_soon(self._run, lease)

    async def _run(self, lease: Lease) -> None:
        ended = False
        try:
            async with self._limiter:
                if not lease.lost:
                    await run_body(lease, self.context)
            ended = True
        except Exception:
            ended = True
            log.exception(
                "task %s: its run failed; it runs again when its hold lapses", lease.task_id
            )
        finally:
            if lease.lost:
                self.metrics.inc("engine_task_holds_lost_total")
            # A run cut short by the server stopping keeps its hold listed: it is given back.
            if (ended or lease.lost) and self.held.get(lease.task_id) is lease:
                del self.held[lease.task_id]

    async def _renew_held(self) -> None:
        interval = self.settings.lease / RENEWALS_PER_LEASE
        while True:
            await anyio.sleep(interval)
            async with anyio.create_task_group() as group:
                for lease in list(self.held.values()):
                    group.start_soon(lease.renew)

    async def _take_over_lapsed(self) -> None:
        interval = self.settings.lease / SWEEPS_PER_LEASE
        failures = 0
        while True:
            # A store that refuses writes makes every takeover fail: look less often meanwhile
            # (up to 16 times the interval), so a run waiting to keep a checkpoint comes first.
            backoff = 2 ** min(failures, MAX_BACKOFF_DOUBLINGS)
            await anyio.sleep(interval * backoff * (0.5 + random.random()))
            try:
                due = await self.records.due(DUE_BATCH)
                for task_id in due:
                    if task_id not in self.held:
                        lease = await self._take(task_id)
                        if lease is not None:
                            self.launch(lease)
            except StoreUnavailable as exc:
                failures += 1
                log.warning(
                    "could not look for tasks to take over (looking again in about %g s): %s",
                    interval * 2 ** min(failures, MAX_BACKOFF_DOUBLINGS),
                    exc,
                )
            else:
                failures = 0

    async def _take(self, task_id: str) -> Lease | None:
        """Hold a task whose hold lapsed on the store's clock (or was given back); ``None``
        when it needs none, another replica came first, or it was taken over too often (it
        then fails)."""
        record = await self.records.load(task_id)
        if record is None:
            return None
        if record.status is not Status.WORKING:  # a stale entry of the due index
            await self.records.save(changed(record), due_in=None)
            return None
        if record.due_in is not None and record.due_in > 0:  # held, on the store's clock
            return None
        owner = random_bytes(16)
        # A hold that lapsed (rather than one given back) left steps that may have run without
        # their checkpoint: counted, so a task that keeps losing its runner ends.
        takeovers = record.takeovers + (record.owner is not None)
        if takeovers > self.settings.max_takeovers:
            await self._fail_taken_over(record, takeovers)
            return None
        # The same round again: the run that died journaled nothing, and its checkpoints are
        # in the record. The fence moves on: the run before can write nothing more.
        draft = changed(record, owner=owner, fence=record.fence + 1, takeovers=takeovers)
        taken = time.monotonic()
        if not await self.records.save(draft, due_in=self.settings.lease):
            return None
        log.info("task %s: taken over, its hold had lapsed or was given back", task_id)
        self.metrics.inc("engine_task_takeovers_total")
        return Lease(self.records, draft, owner, self.settings.lease, taken=taken)

    async def _fail_taken_over(self, record: TaskRecord, takeovers: int) -> None:
        """End a task whose runs kept losing their hold, rather than run its steps again."""
        message = (
            f"Task {record.task_id} was taken over {takeovers - 1} times (the replicas running "
            "it died, paused or lost the store), more than max_task_takeovers "
            f"({self.settings.max_takeovers}); it is not run again, so that its steps do not "
            "repeat. Call the tool again, and check the replicas' logs and the store's health."
        )
        error = MCPError(INTERNAL_ERROR, message, {"taskId": record.task_id})
        draft = changed(
            record,
            status=Status.FAILED,
            error=error.to_error(),
            message=message,
            updated=time.time(),
            owner=None,
            fence=record.fence + 1,
            takeovers=takeovers,
        )
        if not await self.records.save(draft, due_in=None):
            return
        log.error("%s", message)
        self.metrics.inc("engine_task_runs_total", status=Status.FAILED.value)
        await self._changed(draft)
        tool = self.context.tools.get(draft.target)
        if tool is not None:
            request = task_request(draft)
            await journal_run(
                self.context, tool, draft, request, "failed", None, time.perf_counter()
            )

    async def _give_back(self) -> None:
        for lease in list(self.held.values()):
            lease.lose()
            try:
                await self.records.save(changed(lease.record, owner=None), due_in=0.0)
            except StoreUnavailable:
                return  # its hold lapses by itself
        self.held.clear()

    async def _on_bus(self, event: str, task_id: str) -> None:
        if event == "cancel":
            lease = self.held.get(task_id)
            if lease is not None:
                log.info("task %s cancelled: its body stops", task_id)
                lease.lose()
        elif event == "status":
            for watcher in list(self.watchers.get(task_id, ())):
                try:
                    await watcher()
                except Exception:
                    log.exception("a watcher of task %s failed", task_id)

    async def _changed(self, record: TaskRecord) -> None:
        """A task's status changed: its watchers, on every replica, hear of it."""
        await self.bus.publish("task", "status", record.task_id)


class _Watching:
    __slots__ = ("task_id", "watcher", "watchers")

    def __init__(self, watchers: dict[str, set[Watcher]], task_id: str, watcher: Watcher) -> None:
        self.watchers = watchers
        self.task_id = task_id
        self.watcher = watcher

    def __enter__(self) -> None:
        self.watchers.setdefault(self.task_id, set()).add(self.watcher)

    def __exit__(self, *exc_info: object) -> None:
        watchers = self.watchers.get(self.task_id)
        if watchers is not None:
            watchers.discard(self.watcher)
            if not watchers:
                del self.watchers[self.task_id]


class _Start:
    """A tool call that becomes a task once its resolvers are answered, if its tool wants."""

    __slots__ = ("tasks", "tool")

    def __init__(self, tasks: Tasks, tool: Tool) -> None:
        self.tasks = tasks
        self.tool = tool

    async def wanted(self, arguments: dict[str, Any]) -> bool:
        policy = self.tool.task
        return policy is not None and policy.wanted(arguments)

    async def start(
        self,
        request: CallRequest,
        call_id: bytes,
        round_no: int,
        state: CallState,
        principal: str | None,
    ) -> RoundReply:
        return await self.tasks.create(self.tool, request, call_id, round_no, state, principal)


def task_start(
    tasks: Tasks | None, tool: Tool, request: CallRequest, in_place: AnswerSource | None
) -> TaskStart | None:
    """How this call of ``tool`` may become a task: ``None`` when it runs in rounds.

    A tool that requires a task refuses a client that cannot take one (-32021), and a server
    without a store (which has no tasks) with a message that says so.
    """
    policy = tool.task
    if policy is None:
        return None
    if in_place is None and declares_tasks(request.scope.capabilities):
        if tasks is not None:
            return _Start(tasks, tool)
        if policy.required:
            raise MCPError(
                INTERNAL_ERROR,
                f"Tool {tool.name!r} runs as a task, and tasks need a store: configure store= "
                "(sqlite:///tasks.db, or a redis:// URL for several replicas)",
            )
        return None
    if policy.required:
        raise missing_extension(f"Tool {tool.name!r}")
    return None


def _same_principal(tag: bytes | None, principal: str | None) -> bool:
    if tag is None or principal is None:
        return tag is None and principal is None
    return principal_tag(principal, tag[:4]) == tag


def _busy(task_id: str) -> MCPError:
    return MCPError(
        INTERNAL_ERROR, f"Task {task_id} changed while this request was writing it; send it again"
    )


__all__ = ["Tasks", "task_start"]
