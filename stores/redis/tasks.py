"""Tasks on Redis (`TaskStore`): a task is a hash under its id's hash tag; two indexes
under the index tag say which tasks are due (scored by when) and which are live (scored by when
they expire, for the listing).

On a single Redis one script writes the hash and both indexes. On a cluster the indexes live on
another node, so they are written apart: a due time before the task (so a task that needs a
runner is never missing from the index; an entry for a write that then lost is only looked at
and passed over), the rest after. Index entries of expired tasks are dropped when read.

Due times are decided in the scripts on the Redis server's clock (``TIME``), never on a
replica's: a replica whose clock is off neither takes over a live hold nor lets one lapse. On a
cluster the due index is scored by the time of the task's node, and read on the index's node:
their clocks differ only as much as the nodes' do, and the read that decides a takeover
compares on the task's node.
"""

from __future__ import annotations

import time
from typing import Any

from redis.asyncio import Redis

from .._checks import check_fence, check_lease, check_limit, check_task_id, check_task_write
from ..base import TaskRow
from . import lua
from .client import as_bytes
from .core import RedisCore, milliseconds

_FIELDS = ("version", "status", "target", "created", "updated", "record", "fence", "due")


def _text(value: Any) -> str:
    return as_bytes(value, "a task field").decode()


class RedisTasks(RedisCore):
    """`TaskStore` of `RedisStore`."""

    def _open_tasks(self) -> None:
        """Called by `RedisStore.__init__`."""
        self._due_index = self._index_key("tasks:due")
        self._live_index = self._index_key("tasks:live")
        self._single = isinstance(self._client, Redis)
        self._put_task = self._client.register_script(lua.PUT_TASK)
        self._renew_task = self._client.register_script(lua.RENEW_TASK)
        self._get_task = self._client.register_script(lua.GET_TASK)
        self._due_tasks = self._client.register_script(lua.DUE_TASKS)

    def _task_key(self, task_id: str) -> str:
        return self._key(task_id, "task")

    async def put_task(self, row: TaskRow, *, ttl: float, due_in: float | None) -> bool:
        check_task_write(row, ttl, due_in)
        args: list[str | int | float | bytes] = [
            row.task_id,
            row.version,
            row.status,
            row.target,
            repr(row.created),
            repr(row.updated),
            row.record,
            milliseconds(ttl),
            row.fence,
            "" if due_in is None else repr(due_in),
        ]
        what = f"writing task {row.task_id!r}"
        key = self._task_key(row.task_id)
        if self._single:
            keys = [key, self._due_index, self._live_index]
            return bool(
                await self._script(self._put_task, keys, args, "writing task {!r}", row.task_id)
            )
        if due_in is not None:  # a hint until the task's node says when: never missing
            hint = {row.task_id: time.time() + due_in}
            await self._call(what, lambda: self._client.zadd(self._due_index, hint))
        written = await self._script(self._put_task, [key], args, "writing task {!r}", row.task_id)
        if not written:
            return False
        due = _text(written[1])
        if due:
            await self._call(what, lambda: self._client.zadd(self._due_index, {row.task_id: due}))
        else:
            await self._call(what, lambda: self._client.zrem(self._due_index, row.task_id))
        expires = {row.task_id: time.time() + ttl}
        await self._call(what, lambda: self._client.zadd(self._live_index, expires))
        return True

    async def renew_task(self, task_id: str, fence: int, lease: float) -> bool:
        check_task_id(task_id)
        check_fence(fence)
        check_lease(lease)
        key = self._task_key(task_id)
        keys = [key, self._due_index] if self._single else [key]
        args = [task_id, fence, repr(lease)]
        renewed = await self._script(self._renew_task, keys, args, "renewing task {!r}", task_id)
        if not renewed:
            return False
        if not self._single:
            due = _text(renewed[1])
            what = f"renewing task {task_id!r}"
            await self._call(what, lambda: self._client.zadd(self._due_index, {task_id: due}))
        return True

    async def get_task(self, task_id: str) -> TaskRow | None:
        check_task_id(task_id)
        found = await self._script(
            self._get_task, [self._task_key(task_id)], [], "reading task {!r}", task_id
        )
        return _row(task_id, found[:8], float(found[8]))

    async def due_tasks(self, *, limit: int = 100) -> list[str]:
        check_limit(limit)
        ids = await self._script(
            self._due_tasks, [self._due_index], [limit], "reading the due tasks"
        )

        async def live() -> list[str]:
            return await self._live_tasks(self._due_index, [_text(i) for i in ids])

        due: list[str] = await self._call("reading the due tasks", live)
        return due

    async def tasks(self, *, limit: int = 50, status: str | None = None) -> list[TaskRow]:
        check_limit(limit)

        async def read() -> list[TaskRow]:
            await self._client.zremrangebyscore(self._live_index, "-inf", repr(time.time()))
            found: list[TaskRow] = []
            start = 0
            while len(found) < limit:
                size = max(limit - len(found), 32)
                ids = await self._client.zrevrange(self._live_index, start, start + size - 1)
                names = [_text(i) for i in ids]
                rows = await self._task_rows(names)
                for row in rows:
                    if row is not None and (status is None or row.status == status):
                        found.append(row)
                if len(names) < size:
                    break
                start += size
            found.sort(key=lambda row: row.created, reverse=True)
            return found[:limit]

        listed: list[TaskRow] = await self._call("listing tasks", read)
        return listed

    async def _task_rows(self, task_ids: list[str]) -> list[TaskRow | None]:
        if not task_ids:
            return []
        async with self._client.pipeline(transaction=False) as pipe:
            for task_id in task_ids:
                pipe.hmget(self._task_key(task_id), list(_FIELDS))
            replies: list[Any] = await pipe.execute()
        now = time.time()  # for a listing's due times only: no decision is made on them
        return [_row(task_id, reply, now) for task_id, reply in zip(task_ids, replies, strict=True)]

    async def _live_tasks(self, index: str, task_ids: list[str]) -> list[str]:
        """The ids whose task still exists; the others leave ``index``."""
        if not task_ids:
            return []
        async with self._client.pipeline(transaction=False) as pipe:
            for task_id in task_ids:
                pipe.exists(self._task_key(task_id))
            exists: list[Any] = await pipe.execute()
        gone = [task_id for task_id, n in zip(task_ids, exists, strict=True) if not n]
        if gone:
            await self._client.zrem(index, *gone)
        return [task_id for task_id, n in zip(task_ids, exists, strict=True) if n]


def _row(task_id: str, found: list[Any], now: float) -> TaskRow | None:
    """The task of a hash's fields (in `_FIELDS` order), with its due time as seen at ``now``
    (the server's time, where it decides a takeover)."""
    if not found or found[0] is None or found[5] is None:
        return None
    version, status, target, created, updated, record, fence, due = found
    return TaskRow(
        task_id,
        int(version),
        _text(status),
        _text(target),
        float(created),
        float(updated),
        as_bytes(record, "a task record"),
        0 if fence is None else int(fence),
        None if due is None else float(due) - now,
    )
