"""Task records in the store: sealed, written compare-and-set, kept for the task's TTL.

The store sees a task's status, tool and times (for listings) and the record sealed with the
server's key ring: arguments, answers and results are user data. Every write goes over the
version it was read at, so two replicas never both change a task: the second one reads it again
and decides anew (`engine.tasks`).

A record is sealed with its task id as associated data: copied under another task id in the
store, it does not open, and that task reads as not found (the log says why). Records sealed
before task ids were bound (``engine/task/v1``) still open, under any id, until they are
written again (then they are bound) or expire with their task.
"""

from __future__ import annotations

import dataclasses
import logging
import time

from engine.errors import InvalidRequestState
from engine.state.seal import KeyRing
from engine.tasks.record import TaskRecord
from stores import TaskRow, TaskStore

log = logging.getLogger(__name__)

TASK_RECORD = b"engine/task/v2\0"
"""With the task id after it, bound to a task record's seal: it opens as that task's record and
as nothing else."""
UNBOUND_TASK_RECORD = b"engine/task/v1"
"""What records were sealed with before they were bound to their task id: read, never
written."""


def record_purpose(task_id: str) -> bytes:
    """The associated data of ``task_id``'s record."""
    return TASK_RECORD + task_id.encode()


class TaskRecords:
    """The tasks of one server in its store."""

    def __init__(self, store: TaskStore, *, keys: KeyRing) -> None:
        self.store = store
        self.keys = keys

    async def load(self, task_id: str) -> TaskRecord | None:
        """The task, or ``None`` when the store has none (unknown, expired, or sealed with a key
        this server no longer holds)."""
        row = await self.store.get_task(task_id)
        if row is None:
            return None
        try:
            data = self._open(task_id, row.record)
            return TaskRecord.decode(task_id, data, row.version, row.fence, row.due_in)
        except InvalidRequestState as exc:
            if exc.reason == "seal":
                log.warning(
                    "task %s: its record does not open as this task's record (copied in the "
                    "store from another task id, or altered there); the task reads as not found",
                    task_id,
                )
            else:
                log.warning(
                    "task %s cannot be read (%s): is its key still in the ring?",
                    task_id,
                    exc.reason,
                )
            return None

    def _open(self, task_id: str, sealed: bytes) -> bytes:
        try:
            return self.keys.open_record(sealed, record_purpose(task_id))
        except InvalidRequestState as exc:
            if exc.reason != "seal":
                raise
        return self.keys.open_record(sealed, UNBOUND_TASK_RECORD)

    async def save(self, record: TaskRecord, *, due_in: float | None) -> bool:
        """Write ``record`` over the version it was read at, under its fence; its version moves
        on when written.

        False when another write came first (read it again), the fence refused it (the hold is
        another run's, or a live one stands in the way of taking it), or the task's TTL has
        passed. ``due_in``: seconds from now, on the store's clock, until the task next needs a
        runner (its hold lapses then), or ``None``.
        """
        left = record.created + record.ttl - time.time()
        if left <= 0:
            return False
        sealed = self.keys.seal_record(record.encode(), record_purpose(record.task_id))
        row = TaskRow(
            record.task_id,
            record.version + 1,
            record.status.value,
            record.target,
            record.created,
            record.updated,
            sealed,
            record.fence,
        )
        if not await self.store.put_task(row, ttl=left, due_in=due_in):
            return False
        record.version += 1
        record.due_in = due_in
        return True

    async def renew(self, task_id: str, fence: int, lease: float) -> bool:
        """Hold the task ``lease`` seconds more on the store's clock, if ``fence`` still holds
        it; one compare-and-set, which writes nothing else."""
        return await self.store.renew_task(task_id, fence, lease)

    async def due(self, limit: int = 100) -> list[str]:
        """The tasks due now on the store's clock: their holds lapsed, or were given back."""
        return await self.store.due_tasks(limit=limit)

    async def listing(self, *, limit: int = 50, status: str | None = None) -> list[TaskRow]:
        return await self.store.tasks(limit=limit, status=status)


def changed(record: TaskRecord, **fields: object) -> TaskRecord:
    """A copy of ``record`` with ``fields`` changed, to write in its place: the record read
    stays as it was if the write loses."""
    return dataclasses.replace(record, **fields)  # type: ignore[arg-type]


__all__ = ["TASK_RECORD", "TaskRecords", "changed", "record_purpose"]
