"""The SQL of the task operations of `SQLiteStore`, each a function of a connection (see
`stores._sqlite_sql` for the schema and the rest)."""

from __future__ import annotations

import sqlite3

from ._sqlite_sql import Clock, transaction
from .base import TaskRow

_COLUMNS = "task_id, version, status, target, created, updated, record"


def _row(found: tuple[str, int, str, str, float, float, bytes]) -> TaskRow:
    task_id, version, status, target, created, updated, record = found
    return TaskRow(task_id, version, status, target, created, updated, bytes(record))


def put_task(
    conn: sqlite3.Connection, clock: Clock, row: TaskRow, ttl: float, due: float | None
) -> bool:
    with transaction(conn):
        now = clock()
        found = conn.execute(
            "SELECT version FROM tasks WHERE task_id = ? AND expires_at > ?", (row.task_id, now)
        ).fetchone()
        if row.version != (0 if found is None else found[0]) + 1:
            return False
        conn.execute(
            f"INSERT OR REPLACE INTO tasks ({_COLUMNS}, expires_at, due)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.task_id,
                row.version,
                row.status,
                row.target,
                row.created,
                row.updated,
                row.record,
                now + ttl,
                due,
            ),
        )
        return True


def get_task(conn: sqlite3.Connection, clock: Clock, task_id: str) -> TaskRow | None:
    found = conn.execute(
        f"SELECT {_COLUMNS} FROM tasks WHERE task_id = ? AND expires_at > ?", (task_id, clock())
    ).fetchone()
    return None if found is None else _row(found)


def due_tasks(conn: sqlite3.Connection, clock: Clock, until: float, limit: int) -> list[str]:
    return [
        task_id
        for (task_id,) in conn.execute(
            "SELECT task_id FROM tasks WHERE due IS NOT NULL AND due <= ? AND expires_at > ?"
            " ORDER BY due LIMIT ?",
            (until, clock(), limit),
        )
    ]


def tasks(conn: sqlite3.Connection, clock: Clock, limit: int, status: str | None) -> list[TaskRow]:
    sql = f"SELECT {_COLUMNS} FROM tasks WHERE expires_at > ?"
    params: list[float | str | int] = [clock()]
    if status is not None:
        sql += " AND status = ?"
        params.append(status)
    sql += " ORDER BY created DESC LIMIT ?"
    params.append(limit)
    return [_row(found) for found in conn.execute(sql, params)]
