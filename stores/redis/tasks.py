"""The task operations of `RedisStore`: a task is a hash under its id's hash tag; two indexes
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

import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from ..base import TaskRow
from . import lua
from .client import RedisClient, as_bytes

Call = Callable[[str, Callable[[], Awaitable[Any]]], Awaitable[Any]]
"""`RedisStore._call`: one operation under the store's timeout, its failures mapped."""
Script = Callable[..., Awaitable[Any]]
"""`RedisStore._script`: ``(script, keys, args, what, *details)``, one script, over the shared
connection while the store serves (``what.format(*details)`` names it in errors)."""

_FIELDS = ("version", "status", "target", "created", "updated", "record", "fence", "due")


def _text(value: Any) -> str:
    return as_bytes(value, "a task field").decode()


class RedisTasks:
    """Tasks in Redis, for one `RedisStore` (its client, key names and timeout)."""

    def __init__(
        self,
        client: RedisClient,
        *,
        task_key: Callable[[str], str],
        index_key: Callable[[str], str],
        call: Call,
        script: Script,
    ) -> None:
        self._client = client
        self._task_key = task_key
        self._due = index_key("tasks:due")
        self._listed = index_key("tasks:live")
        self._call = call
        self._script = script
        self._single = isinstance(client, Redis)
        self._put: AsyncScript = client.register_script(lua.PUT_TASK)
        self._renew: AsyncScript = client.register_script(lua.RENEW_TASK)
        self._get: AsyncScript = client.register_script(lua.GET_TASK)
        self._due_now: AsyncScript = client.register_script(lua.DUE_TASKS)
        self._clock: AsyncScript = client.register_script(lua.CLOCK)

    async def put(self, row: TaskRow, ttl: float, due_in: float | None) -> bool:
        args: list[str | int | float | bytes] = [
            row.task_id,
            row.version,
            row.status,
            row.target,
            repr(row.created),
            repr(row.updated),
            row.record,
            max(1, math.ceil(ttl * 1000)),
            row.fence,
            "" if due_in is None else repr(due_in),
        ]
        what = f"writing task {row.task_id!r}"
        key = self._task_key(row.task_id)
        if self._single:
            keys = [key, self._due, self._listed]
            return bool(await self._script(self._put, keys, args, "writing task {!r}", row.task_id))
        if due_in is not None:  # a hint until the task's node says when: never missing
            hint = {row.task_id: time.time() + due_in}
            await self._call(what, lambda: self._client.zadd(self._due, hint))
        written = await self._script(self._put, [key], args, "writing task {!r}", row.task_id)
        if not written:
            return False
        due = _text(written[1])
        if due:
            await self._call(what, lambda: self._client.zadd(self._due, {row.task_id: due}))
        else:
            await self._call(what, lambda: self._client.zrem(self._due, row.task_id))
        expires = {row.task_id: time.time() + ttl}
        await self._call(what, lambda: self._client.zadd(self._listed, expires))
        return True

    async def renew(self, task_id: str, fence: int, lease: float) -> bool:
        key = self._task_key(task_id)
        keys = [key, self._due] if self._single else [key]
        args = [task_id, fence, repr(lease)]
        renewed = await self._script(self._renew, keys, args, "renewing task {!r}", task_id)
        if not renewed:
            return False
        if not self._single:
            due = _text(renewed[1])
            what = f"renewing task {task_id!r}"
            await self._call(what, lambda: self._client.zadd(self._due, {task_id: due}))
        return True

    async def get(self, task_id: str) -> TaskRow | None:
        found = await self._script(
            self._get, [self._task_key(task_id)], [], "reading task {!r}", task_id
        )
        return _row(task_id, found[:8], float(found[8]))

    async def due(self, limit: int) -> list[str]:
        ids = await self._script(self._due_now, [self._due], [limit], "reading the due tasks")

        async def live() -> list[str]:
            return await self._live(self._due, [_text(i) for i in ids])

        due: list[str] = await self._call("reading the due tasks", live)
        return due

    async def clock(self) -> float:
        now = await self._script(self._clock, [], [], "reading the time")
        return float(_text(now))

    async def listing(self, limit: int, status: str | None) -> list[TaskRow]:
        async def read() -> list[TaskRow]:
            await self._client.zremrangebyscore(self._listed, "-inf", repr(time.time()))
            found: list[TaskRow] = []
            start = 0
            while len(found) < limit:
                size = max(limit - len(found), 32)
                ids = await self._client.zrevrange(self._listed, start, start + size - 1)
                names = [_text(i) for i in ids]
                rows = await self._rows(names)
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

    async def _rows(self, task_ids: list[str]) -> list[TaskRow | None]:
        if not task_ids:
            return []
        async with self._client.pipeline(transaction=False) as pipe:
            for task_id in task_ids:
                pipe.hmget(self._task_key(task_id), list(_FIELDS))
            replies: list[Any] = await pipe.execute()
        now = time.time()  # for a listing's due times only: no decision is made on them
        return [_row(task_id, reply, now) for task_id, reply in zip(task_ids, replies, strict=True)]

    async def _live(self, index: str, task_ids: list[str]) -> list[str]:
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
