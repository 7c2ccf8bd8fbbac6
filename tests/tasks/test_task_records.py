"""Task records in the store: bound to their task id, carrying the scopes of their call, and
the records the release before wrote (unbound, without scopes) still read."""

from __future__ import annotations

import time

import msgpack
import pytest

from engine.state.seal import KeyRing
from engine.tasks.record import TaskRecord
from engine.tasks.record_store import UNBOUND_TASK_RECORD, TaskRecords, changed
from stores import MemoryStore, TaskRow
from tests.conftest import KEY

pytestmark = pytest.mark.anyio


def a_task(task_id: str, scopes: tuple[str, ...] = ()) -> TaskRecord:
    now = time.time()
    return TaskRecord(
        task_id=task_id,
        target="wipe",
        arguments={"disk": "sda"},
        capabilities={},
        protocol="2026-07-28",
        principal=None,
        created=now,
        ttl=3600,
        poll_ms=10,
        state=b"\x94\x01\x80\x80\x80",
        round_no=1,
        updated=now,
        scopes=scopes,
    )


async def copy(store: MemoryStore, source: str, task_id: str) -> None:
    """What someone who can write to the store does: ``source``'s row under ``task_id``."""
    row = await store.get_task(source)
    assert row is not None
    planted = TaskRow(
        task_id, 1, row.status, row.target, row.created, row.updated, row.record, row.fence
    )
    assert await store.put_task(planted, ttl=60, due_in=None)


async def test_a_record_keeps_the_scopes_of_its_call() -> None:
    records = TaskRecords(MemoryStore(), keys=KeyRing([KEY]))
    assert await records.save(a_task("t1", ("admin", "disks:write")), due_in=None)
    loaded = await records.load("t1")
    assert loaded is not None and loaded.scopes == ("admin", "disks:write")


async def test_a_record_opens_under_its_own_task_id_only() -> None:
    store = MemoryStore()
    records = TaskRecords(store, keys=KeyRing([KEY]))
    assert await records.save(a_task("t1"), due_in=None)
    await copy(store, "t1", "t2")
    assert await records.load("t1") is not None
    assert await records.load("t2") is None


async def test_a_record_of_the_release_before_reads_until_written_again() -> None:
    """Written before task ids were bound and scopes kept: it opens under any id (as it always
    did), without scopes; written again, it is bound."""
    store = MemoryStore()
    keys = KeyRing([KEY])
    records = TaskRecords(store, keys=keys)
    fields = msgpack.unpackb(a_task("t1").encode(), raw=False)
    earlier = msgpack.packb(fields[:-1])  # no scopes, as that release wrote it
    sealed = keys.seal_record(earlier, UNBOUND_TASK_RECORD)
    now = time.time()
    row = TaskRow("t1", 1, "working", "wipe", now, now, sealed, 0)
    assert await store.put_task(row, ttl=60, due_in=None)

    loaded = await records.load("t1")
    assert loaded is not None
    assert loaded.scopes == () and loaded.arguments == {"disk": "sda"}
    assert await records.save(changed(loaded, message="still working"), due_in=None)
    await copy(store, "t1", "t2")
    assert await records.load("t2") is None
    again = await records.load("t1")
    assert again is not None and again.message == "still working"
