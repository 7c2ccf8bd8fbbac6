"""A replica's hold on a task while its body runs, fenced.

The hold is the task's fence (a number the store keeps beside the record, one more at each run
that takes the task) and its due time (when the hold lapses, on the store's clock). Renewals
push the due time on with one compare-and-set on the fence; every write of the run (a
checkpoint, the outcome) goes over the version last written and carries the fence, so it lands
only while the hold is this run's. When the task changed under the run (cancelled, expired, or
taken over by another replica after the hold lapsed), the hold is lost: the run is cancelled
and writes nothing more.

Before a ``once`` step runs, the run makes sure it still holds the task (:meth:`Lease.confirm`):
its last renewal younger than a lease on this process's monotonic clock, then the fence
confirmed by the store. A run that was paused past its lease (a stopped process, a stalled
machine) stops there, without running the step that its successor runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import anyio
import anyio.lowlevel

from engine.tasks.record import Status, TaskRecord
from engine.tasks.record_store import TaskRecords, changed
from stores import StoreUnavailable

log = logging.getLogger("engine.tasks")

WRITE_ATTEMPTS = 3
"""Writes of one change tried over a task re-read after losing to another write that left the
hold as it was."""
RETRY_FIRST = 0.05
RETRY_MOST = 2.0
"""Seconds between tries of a checkpoint the store did not take: doubling from the first to
the most."""

Clock = Callable[[], float]


def due_in(record: TaskRecord, lease: float) -> float | None:
    """When a task needs a runner next, in seconds from now: when the hold of a working task
    lapses; never for one that waits or ended."""
    return lease if record.status is Status.WORKING else None


class Lease:
    """One run's hold on one task: the record as the run last wrote it, the hold's fence, when
    the store last confirmed it, the run's cancel scope, and its writes, one at a time."""

    def __init__(
        self,
        records: TaskRecords,
        record: TaskRecord,
        owner: bytes,
        duration: float,
        *,
        taken: float,
        clock: Clock = time.monotonic,
    ) -> None:
        self.records = records
        self.record = record
        self.owner = owner
        self.duration = duration
        self.fence = record.fence
        self.clock = clock
        self.renewed = taken
        """When (``clock``) the last write that the store took as this hold's was sent: the
        hold lives at least a lease from then, on the store's clock."""
        self.scope = anyio.CancelScope()
        """The run's: cancelled when the hold is lost or the task cancelled."""
        self.lost = False
        self._lock = anyio.Lock()

    @property
    def task_id(self) -> str:
        return self.record.task_id

    def fresh(self) -> bool:
        """Whether the hold is surely still this run's, by this process's clock alone."""
        return self.clock() - self.renewed < self.duration

    async def write(self, **fields: object) -> bool:
        """Write these changes over the task as this run holds it; False, and the run cancelled,
        when the hold is lost. Raises `StoreUnavailable` when the store does not answer."""
        async with self._lock:
            if self.lost:
                return False
            for _ in range(WRITE_ATTEMPTS):
                draft = changed(self.record, **fields)
                sent = self.clock()
                if await self.records.save(draft, due_in=due_in(draft, self.duration)):
                    self.record = draft
                    self.renewed = sent
                    return True
                fresh = await self.records.load(self.task_id)
                if fresh is None or fresh.fence != self.fence or fresh.status is not Status.WORKING:
                    break
                self.record = fresh
            self.lose()
            return False

    async def keep(self, what: str, **fields: object) -> bool:
        """`write`, tried again while the store does not answer: the body waits meanwhile.

        A write that lands once the store answers again is right whenever it lands (its fence
        and version say the hold is still this run's), so it is tried until the store takes or
        refuses it, or the task's TTL runs out. False, the run cancelled, when the hold is lost.
        """
        delay = RETRY_FIRST
        waited = False
        while True:
            try:
                written = await self.write(**fields)
            except StoreUnavailable as exc:
                if self.record.created + self.record.ttl <= time.time():
                    self.lose()
                    return False
                if not waited:
                    log.warning(
                        "task %s: %s not kept yet, the body waits and it is tried again: %s",
                        self.task_id,
                        what,
                        exc,
                    )
                    waited = True
                await anyio.sleep(delay)
                delay = min(delay * 2, RETRY_MOST)
                continue
            if waited and written:
                log.info("task %s: %s kept; the body goes on", self.task_id, what)
            return written

    async def renew(self) -> None:
        """Push the hold's end a lease further; a store that does not answer only logs."""
        try:
            await self._renew()
        except StoreUnavailable as exc:  # a renewal comes again soon; the next may pass
            log.warning("could not renew the hold on task %s: %s", self.task_id, exc)

    async def confirm(self, step: str) -> None:
        """Before the ``once`` step ``step`` runs: stop the run here unless its hold is surely
        its own. Its last renewal must be younger than a lease on this process's clock, and the
        store must confirm the fence (which renews the hold), within a lease of asking. A store
        that does not answer is asked again while the last renewal is young enough."""
        delay = RETRY_FIRST
        while not self.lost and self.fresh():
            sent = self.clock()
            try:
                held = await self._renew()
            except StoreUnavailable as exc:
                if delay == RETRY_FIRST:
                    log.warning(
                        "task %s: the store did not confirm the hold before step %r, asking "
                        "again while the hold is young enough: %s",
                        self.task_id,
                        step,
                        exc,
                    )
                await anyio.sleep(delay)
                delay = min(delay * 2, RETRY_MOST)
                continue
            if held and self.clock() - sent < self.duration:
                return
            break
        if not self.lost:
            log.warning(
                "task %s: its hold was last confirmed %.1f s ago, not within its %g s lease (was "
                "this process paused, or the store away?); step %r does not run here, and the "
                "run stops",
                self.task_id,
                self.clock() - self.renewed,
                self.duration,
                step,
            )
            self.lose()
        await anyio.lowlevel.checkpoint()  # the cancelled run stops here
        raise RuntimeError("a run that lost its hold went on")  # pragma: no cover

    async def _renew(self) -> bool:
        async with self._lock:
            if self.lost:
                return False
            sent = self.clock()
            if await self.records.renew(self.task_id, self.fence, self.duration):
                self.renewed = sent
                return True
        log.info("task %s: its hold is another run's now, or the task ended", self.task_id)
        self.lose()
        return False

    def lose(self) -> None:
        """The task is no longer this run's: stop the body, write nothing more."""
        self.lost = True
        self.scope.cancel()


__all__ = ["Lease", "due_in"]
