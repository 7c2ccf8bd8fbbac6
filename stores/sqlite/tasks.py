"""Tasks on SQLite (`TaskStore`), and their SQL, each operation a function of a connection
(see `stores.sqlite.schema` for the schema).

Due times and expiries are on the store's clock: the wall clock of the host that holds the
file, which every process on it shares."""

from __future__ import annotations

import functools
import sqlite3

from .._checks import check_fence, check_lease, check_limit, check_task_id, check_task_write
from .._fences import fence_allows, seconds_until
from ..base import TaskRow
from .core import SQLiteCore
from .schema import Clock, transaction


class SQLiteTasks(SQLiteCore):
    """`TaskStore` of `SQLiteStore`: the writes and reads of one task on the event loop's
    thread (a large record in a worker thread), listings in a worker thread."""

    async def put_task(self, row: TaskRow, *, ttl: float, due_in: float | None) -> bool:
        check_task_write(row, ttl, due_in)
        write = functools.partial(write_task, row=row, ttl=ttl, due_in=due_in)
        written: bool = await self._write_sized("put_task", write, len(row.record))
        return written

    async def renew_task(self, task_id: str, fence: int, lease: float) -> bool:
        check_task_id(task_id)
        check_fence(fence)
        check_lease(lease)
        return await self._run_quick(
            "renew_task",
            lambda conn, clock: renew_hold(conn, clock, task_id, fence, lease),
            write=True,
        )

    async def get_task(self, task_id: str) -> TaskRow | None:
        check_task_id(task_id)
        return await self._run_quick(
            "get_task", lambda conn, clock: read_task(conn, clock, task_id), write=False
        )

    async def due_tasks(self, *, limit: int = 100) -> list[str]:
        check_limit(limit)
        return await self._run_quick(
            "due_tasks", lambda conn, clock: read_due(conn, clock, limit), write=False
        )

    async def tasks(self, *, limit: int = 50, status: str | None = None) -> list[TaskRow]:
        check_limit(limit)
        return await self._run(
            "tasks", lambda conn, clock: list_tasks(conn, clock, limit, status), write=False
        )


_COLUMNS = "task_id, version, status, target, created, updated, record, fence"


def _row(
    found: tuple[str, int, str, str, float, float, bytes, int], due_in: float | None
) -> TaskRow:
    task_id, version, status, target, created, updated, record, fence = found
    return TaskRow(task_id, version, status, target, created, updated, bytes(record), fence, due_in)


def write_task(
    conn: sqlite3.Connection, clock: Clock, row: TaskRow, ttl: float, due_in: float | None
) -> bool:
    with transaction(conn):
        now = clock()
        found = conn.execute(
            "SELECT version, fence, due FROM tasks WHERE task_id = ? AND expires_at > ?",
            (row.task_id, now),
        ).fetchone()
        if found is None:
            if row.version != 1:
                return False
        else:
            version, fence, due = found
            if row.version != version + 1 or not fence_allows(fence, due, now, row.fence):
                return False
        conn.execute(
            f"INSERT OR REPLACE INTO tasks ({_COLUMNS}, expires_at, due)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.task_id,
                row.version,
                row.status,
                row.target,
                row.created,
                row.updated,
                row.record,
                row.fence,
                now + ttl,
                None if due_in is None else now + due_in,
            ),
        )
        return True


def renew_hold(
    conn: sqlite3.Connection, clock: Clock, task_id: str, fence: int, lease: float
) -> bool:
    now = clock()
    renewed = conn.execute(
        "UPDATE tasks SET due = ? WHERE task_id = ? AND fence = ? AND due IS NOT NULL"
        " AND expires_at > ?",
        (now + lease, task_id, fence, now),
    )
    return renewed.rowcount == 1


def read_task(conn: sqlite3.Connection, clock: Clock, task_id: str) -> TaskRow | None:
    now = clock()
    found = conn.execute(
        f"SELECT {_COLUMNS}, due FROM tasks WHERE task_id = ? AND expires_at > ?", (task_id, now)
    ).fetchone()
    if found is None:
        return None
    return _row(found[:-1], seconds_until(found[-1], now))


def read_due(conn: sqlite3.Connection, clock: Clock, limit: int) -> list[str]:
    now = clock()
    return [
        task_id
        for (task_id,) in conn.execute(
            "SELECT task_id FROM tasks WHERE due IS NOT NULL AND due <= ? AND expires_at > ?"
            " ORDER BY due LIMIT ?",
            (now, now, limit),
        )
    ]


def list_tasks(
    conn: sqlite3.Connection, clock: Clock, limit: int, status: str | None
) -> list[TaskRow]:
    now = clock()
    sql = f"SELECT {_COLUMNS}, due FROM tasks WHERE expires_at > ?"
    params: list[float | str | int] = [now]
    if status is not None:
        sql += " AND status = ?"
        params.append(status)
    sql += " ORDER BY created DESC LIMIT ?"
    params.append(limit)
    return [_row(found[:-1], seconds_until(found[-1], now)) for found in conn.execute(sql, params)]
