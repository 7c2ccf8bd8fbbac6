"""2025-11-25 sessions in the registry every replica reads: a session deleted while a request
holds it stays deleted, and the in-process registry forgets deleted sessions once expired."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from stores import MemoryStore

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("backend", ["process", "memory", "redis"])
async def test_a_session_refreshed_while_it_is_deleted_stays_deleted(
    backend: str, redis_url: str
) -> None:
    from engine.fleet.sessions import LegacySession, SessionRegistry, new_session_id
    from stores import open_store

    store = {"process": None, "memory": MemoryStore(), "redis": None}[backend]
    if backend == "redis":
        store = open_store(redis_url)
    sessions = SessionRegistry(store, ttl=3600)
    session = LegacySession(new_session_id(), "2025-11-25", {})
    await sessions.save(session)
    held = await sessions.get(session.id)  # a request in flight holds the session
    assert held is not None
    await sessions.delete(session.id)  # DELETE arrives on another request
    held.log_level = "debug"
    await sessions.save(held)  # the first request saves it afterwards (setLevel, keep-alive)
    assert await sessions.get(session.id) is None
    if store is not None:
        await store.aclose()


async def test_sessions_deleted_in_process_are_forgotten_once_expired() -> None:
    from engine.fleet.sessions import LegacySession, SessionRegistry, new_session_id

    sessions = SessionRegistry(None, ttl=0.001)
    for _ in range(3000):
        session = LegacySession(new_session_id(), "2025-11-25", {})
        await sessions.save(session)
        await sessions.delete(session.id)
        await anyio.lowlevel.checkpoint()
    assert len(sessions._deleted_local) <= 1025  # swept, not one entry per session ever deleted
