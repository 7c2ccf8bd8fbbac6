"""2025-11-25 sessions: what ``initialize`` negotiated, kept where every replica can read it.

With a store, a session lives in it (as a small blob, refreshed while in use), so any replica
accepts any request of any session and no load-balancer stickiness is needed. Without a store
sessions live in this process only.
"""

from __future__ import annotations

import hmac
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import msgpack
from pydantic_core import to_json

from engine._internal.budgets import over_budget
from engine._internal.metrics import Metrics
from engine.errors import OVER_BUDGET
from engine.questions.kinds import session_keeps
from engine.state.claims import principal_tag
from stores import BlobStore

SESSION_BLOB = "session"
DELETED_BLOB = "deleted"
"""Kept for twice a session's TTL once it is deleted: a refresh racing the ``DELETE`` may write
the session back (for one TTL from then), and this marker keeps it deleted on every replica for
longer than what was written back can live."""
MAX_LOCAL = 100_000
CLIENT_INFO_KEYS = ("name", "version", "title")
CLIENT_INFO_CHARS = 256
"""What a session keeps of ``clientInfo``: these string fields, each cut to this many characters.
A session lives for its TTL and a replica holds up to ``MAX_LOCAL``, so nothing a client sends
is kept unbounded."""


@dataclass(slots=True)
class LegacySession:
    """One 2025-11-25 client connection, as negotiated by ``initialize``."""

    id: str
    protocol_version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any] = field(default_factory=dict)
    log_level: str | None = None
    subscriptions: list[str] = field(default_factory=list)
    touched: float = field(default_factory=time.time)
    principal: bytes | None = None
    """A salted digest of who initialized the session (``principal_tag``), never the name
    itself; ``None`` when the ``principal`` callback named nobody."""

    @classmethod
    def for_principal(
        cls,
        principal: str | None,
        protocol_version: str,
        capabilities: dict[str, Any],
        client_info: dict[str, Any],
    ) -> LegacySession:
        """A new session, bound to ``principal``."""
        tag = principal_tag(principal) if principal is not None else None
        return cls(new_session_id(), protocol_version, capabilities, client_info, principal=tag)

    def owned_by(self, principal: str | None) -> bool:
        """Whether ``principal`` is who initialized this session: only they are served by it."""
        if self.principal is None or principal is None:
            return self.principal is None and principal is None
        return hmac.compare_digest(principal_tag(principal, self.principal[:4]), self.principal)

    def encode(self) -> bytes:
        return msgpack.packb(  # type: ignore[no-any-return]
            [
                2,
                self.id,
                self.protocol_version,
                self.capabilities,
                self.client_info,
                self.log_level,
                self.subscriptions,
                self.touched,
                self.principal,
            ],
            use_bin_type=True,
        )

    @classmethod
    def decode(cls, data: bytes) -> LegacySession | None:
        try:
            raw = msgpack.unpackb(data, raw=False)
            if raw[0] == 1:  # before sessions were bound: it serves no named principal
                raw = [*raw, None]
            version, sid, protocol, caps, info, level, subs, touched, principal = raw
        except (ValueError, TypeError, IndexError, KeyError, msgpack.UnpackException):
            return None
        if version not in (1, 2) or not isinstance(principal, (bytes, type(None))):
            return None
        return cls(sid, protocol, caps, info, level, list(subs), touched, principal)


def bounded_client_info(info: Any) -> dict[str, str]:
    """``clientInfo`` as a session keeps it: ``name``, ``version`` and ``title``, strings only,
    each at most ``CLIENT_INFO_CHARS`` long."""
    if not isinstance(info, dict):
        return {}
    return {
        key: value[:CLIENT_INFO_CHARS]
        for key in CLIENT_INFO_KEYS
        if isinstance(value := info.get(key), str)
    }


OTHER_CAPABILITIES_BYTES = 4096
"""JSON bytes of the capabilities the engine does not read (``experimental``, extensions) a
session keeps as sent, for handlers that look at them; past that they are dropped."""


def bounded_capabilities(capabilities: Any) -> dict[str, Any]:
    """Client capabilities as a session keeps them: the keys and sub-keys the question kinds
    need (``QuestionKind.session_keeps``), each sub-key's object emptied (the server reads
    presence, never content) and any other sub-key dropped, and other keys as sent while they
    fit in ``OTHER_CAPABILITIES_BYTES``."""
    if not isinstance(capabilities, dict):
        return {}
    known = session_keeps()
    kept: dict[str, Any] = {}
    for key, subkeys in known.items():
        declared = capabilities.get(key)
        if not isinstance(declared, dict):
            continue
        kept[key] = {
            sub: {} if isinstance(value, dict) else value
            for sub in subkeys
            if sub in declared and isinstance(value := declared[sub], (dict, bool))
        }
    room = OTHER_CAPABILITIES_BYTES
    for key, value in capabilities.items():
        if key in known or not isinstance(key, str):
            continue
        size = len(key) + len(to_json(value, fallback=str))
        if size <= room:
            kept[key] = value
            room -= size
    return kept


def new_session_id() -> str:
    """Cryptographically random, visible ASCII, as the 2025-11-25 transport requires."""
    return secrets.token_urlsafe(24)


class SessionRegistry:
    """Finds and saves sessions; in the store when there is one, else in this process."""

    def __init__(
        self,
        store: BlobStore | None,
        ttl: float,
        *,
        max_per_principal: int = 100,
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        self.ttl = ttl
        self._local: dict[str, LegacySession] = {}
        self._deleted_local: dict[str, float] = {}
        """Sessions deleted in this process, and when: a save racing the delete is dropped."""
        self._next_sweep = 1024
        self.max_per_principal = max_per_principal
        self.metrics = metrics
        self._opened: dict[str, dict[str, float]] = {}
        """Sessions opened here, by principal key, each with when it was last used here."""
        self._opener: dict[str, str] = {}
        """The principal key of each session in ``_opened``."""
        self._next_count_sweep = 1024

    def admit(self, principal: str, session_id: str) -> None:
        """Count a new session of ``principal``, or refuse it at ``max_sessions_per_principal``
        (-32031). Sessions opened on this replica count, until deleted or unused here for the
        session TTL."""
        now = time.monotonic()
        opened = self._opened.setdefault(principal, {})
        for sid in [sid for sid, used in opened.items() if now - used > self.ttl]:
            del opened[sid]
            self._opener.pop(sid, None)
        if len(opened) >= self.max_per_principal:
            raise over_budget(
                self.metrics,
                OVER_BUDGET,
                "max_sessions_per_principal",
                self.max_per_principal,
                f"You have {len(opened)} sessions open on this replica, as many as one principal "
                "may; close those you no longer use (HTTP DELETE with their MCP-Session-Id), "
                "then initialize again",
            )
        opened[session_id] = now
        self._opener[session_id] = principal
        if len(self._opener) > self._next_count_sweep:
            self._sweep_counts(now)

    def _used(self, session_id: str) -> None:
        principal = self._opener.get(session_id)
        if principal is not None:
            self._opened[principal][session_id] = time.monotonic()

    def forget(self, session_id: str) -> None:
        """``session_id`` no longer counts against its principal's sessions."""
        principal = self._opener.pop(session_id, None)
        if principal is not None:
            opened = self._opened[principal]
            opened.pop(session_id, None)
            if not opened:
                del self._opened[principal]

    def _sweep_counts(self, now: float) -> None:
        """Forget the sessions unused here for the TTL, so the counts stay bounded."""
        for principal, opened in list(self._opened.items()):
            for sid in [sid for sid, used in opened.items() if now - used > self.ttl]:
                del opened[sid]
                self._opener.pop(sid, None)
            if not opened:
                del self._opened[principal]
        self._next_count_sweep = max(1024, 2 * len(self._opener))

    def _key(self, session_id: str) -> str:
        return f"session-{session_id}"

    async def get(self, session_id: str) -> LegacySession | None:
        if self.store is None:
            session = self._local.get(session_id)
            if session is not None and time.time() - session.touched > self.ttl:
                del self._local[session_id]
                return None
        else:
            key = self._key(session_id)
            blob = await self.store.get_blob(key, SESSION_BLOB)
            session = LegacySession.decode(blob) if blob else None
            if session is not None and await self.store.get_blob(key, DELETED_BLOB) is not None:
                return None  # deleted; what a racing refresh wrote back is left to expire
        if session is not None:
            self._used(session_id)
            if time.time() - session.touched > self.ttl / 4:
                await self.save(session)  # keep an active session alive
        return session

    async def save(self, session: LegacySession) -> None:
        session.touched = time.time()
        if self.store is None:
            if session.id in self._deleted_local:
                return  # deleted while this request held it
            self._local[session.id] = session
            self._maybe_sweep(session.touched)
        else:
            await self.store.put_blob(
                self._key(session.id), SESSION_BLOB, session.encode(), self.ttl
            )

    def _maybe_sweep(self, now: float) -> None:
        if len(self._local) + len(self._deleted_local) > self._next_sweep:
            self._sweep(now)

    def _sweep(self, now: float) -> None:
        """Forget expired sessions (kept in this process only), so `initialize` in a loop cannot
        grow memory without bound; past ``MAX_LOCAL`` the least recently used go too."""
        for sid in [s.id for s in self._local.values() if now - s.touched > self.ttl]:
            del self._local[sid]
        for sid in [sid for sid, at in self._deleted_local.items() if now - at > 2 * self.ttl]:
            del self._deleted_local[sid]
        if len(self._local) > MAX_LOCAL:
            by_age = sorted(self._local.values(), key=lambda s: s.touched)
            for stale in by_age[: len(self._local) - MAX_LOCAL]:
                del self._local[stale.id]
        for oldest in list(self._deleted_local)[: max(0, len(self._deleted_local) - MAX_LOCAL)]:
            del self._deleted_local[oldest]  # in deletion order
        self._next_sweep = max(1024, 2 * (len(self._local) + len(self._deleted_local)))

    async def delete(self, session_id: str) -> None:
        self.forget(session_id)
        if self.store is None:
            if self._local.pop(session_id, None) is not None:
                now = time.time()
                self._deleted_local[session_id] = now
                self._maybe_sweep(now)
        else:
            # The store has no delete: the marker first (a deleted session must answer 404 on
            # every replica at once, whatever a racing refresh writes), then the session blob
            # emptied to expire at once.
            key = self._key(session_id)
            await self.store.put_blob(key, DELETED_BLOB, b"1", 2 * self.ttl)
            await self.store.put_blob(key, SESSION_BLOB, b"", 1)
