"""A replica's hold on a task while its body runs.

The hold is in the record itself (its ``owner`` and ``lease_until``), renewed while the body
runs; every write of the run (a checkpoint, a renewal, the outcome) goes over the version last
written, so it lands only while the hold is this run's. When a write finds the task changed
under it (cancelled, expired, or taken over by another replica after the hold lapsed), the hold
is lost: the run is cancelled and writes nothing more.
"""

from __future__ import annotations

import logging
import time

import anyio

from engine.store_services.task_records import TaskRecords, changed
from engine.tasks.record import Status, TaskRecord

log = logging.getLogger("engine.tasks")

WRITE_ATTEMPTS = 3
"""Writes of one change tried over a task re-read after losing to another write that left the
hold as it was."""


def due_time(record: TaskRecord) -> float | None:
    """When a task needs a runner next: when its hold lapses, while it is working."""
    return record.lease_until if record.status is Status.WORKING else None


class Lease:
    """One run's hold on one task: the record as the run last wrote it, the run's cancel scope,
    and its writes, one at a time."""

    def __init__(
        self, records: TaskRecords, record: TaskRecord, owner: bytes, duration: float
    ) -> None:
        self.records = records
        self.record = record
        self.owner = owner
        self.duration = duration
        self.scope = anyio.CancelScope()
        """The run's: cancelled when the hold is lost or the task cancelled."""
        self.lost = False
        self._lock = anyio.Lock()

    @property
    def task_id(self) -> str:
        return self.record.task_id

    async def write(self, **fields: object) -> bool:
        """Write these changes over the task as this run holds it; False, and the run cancelled,
        when the hold is lost. Raises `StoreUnavailable` when the store does not answer."""
        async with self._lock:
            if self.lost:
                return False
            for _ in range(WRITE_ATTEMPTS):
                draft = changed(self.record, **fields)
                if await self.records.save(draft, due=due_time(draft)):
                    self.record = draft
                    return True
                fresh = await self.records.load(self.task_id)
                if fresh is None or fresh.owner != self.owner or fresh.status is not Status.WORKING:
                    break
                self.record = fresh
            self.lose()
            return False

    async def renew(self) -> None:
        """Push the hold's end a lease further; a store that does not answer only logs."""
        try:
            await self.write(lease_until=time.time() + self.duration)
        except Exception as exc:  # a renewal comes again soon; the next may pass
            log.warning("could not renew the hold on task %s: %s", self.task_id, exc)

    def lose(self) -> None:
        """The task is no longer this run's: stop the body, write nothing more."""
        self.lost = True
        self.scope.cancel()


__all__ = ["Lease", "due_time"]
