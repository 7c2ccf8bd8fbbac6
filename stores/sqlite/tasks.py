"""The SQL of the task operations of `SQLiteStore`, each a function of a connection (see
`stores._sqlite_sql` for the schema and the rest).

Due times and expiries are on the store's clock: the wall clock of the host that holds the
file, which every process on it shares."""

from __future__ import annotations

import sqlite3

from .._fences import fence_allows, seconds_until
from ..base import TaskRow
from .schema import Clock, transaction

_COLUMNS = "task_id, version, status, target, created, updated, record, fence"


def _row(
    found: tuple[str, int, str, str, float, float, bytes, int], due_in: float | None
) -> TaskRow:
    task_id, version, status, target, created, updated, record, fence = found
    return TaskRow(task_id, version, status, target, created, updated, bytes(record), fence, due_in)


def put_task(
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


def renew_task(
    conn: sqlite3.Connection, clock: Clock, task_id: str, fence: int, lease: float
) -> bool:
    now = clock()
    renewed = conn.execute(
        "UPDATE tasks SET due = ? WHERE task_id = ? AND fence = ? AND due IS NOT NULL"
        " AND expires_at > ?",
        (now + lease, task_id, fence, now),
    )
    return renewed.rowcount == 1


def get_task(conn: sqlite3.Connection, clock: Clock, task_id: str) -> TaskRow | None:
    now = clock()
    found = conn.execute(
        f"SELECT {_COLUMNS}, due FROM tasks WHERE task_id = ? AND expires_at > ?", (task_id, now)
    ).fetchone()
    if found is None:
        return None
    return _row(found[:-1], seconds_until(found[-1], now))


def due_tasks(conn: sqlite3.Connection, clock: Clock, limit: int) -> list[str]:
    now = clock()
    return [
        task_id
        for (task_id,) in conn.execute(
            "SELECT task_id FROM tasks WHERE due IS NOT NULL AND due <= ? AND expires_at > ?"
            " ORDER BY due LIMIT ?",
            (now, now, limit),
        )
    ]


def tasks(conn: sqlite3.Connection, clock: Clock, limit: int, status: str | None) -> list[TaskRow]:
    now = clock()
    sql = f"SELECT {_COLUMNS}, due FROM tasks WHERE expires_at > ?"
    params: list[float | str | int] = [now]
    if status is not None:
        sql += " AND status = ?"
        params.append(status)
    sql += " ORDER BY created DESC LIMIT ?"
    params.append(limit)
    return [_row(found[:-1], seconds_until(found[-1], now)) for found in conn.execute(sql, params)]
