"""What `RedisStore.ping` checks: that Redis takes a write, and keeps what it is given.

A ``PING`` is answered by a Redis that refuses every write: one at ``maxmemory`` under
``noeviction`` (``OOM``), or a read-only replica (``READONLY``). So the check writes a small key
with a TTL. And a Redis that evicts keys under memory pressure drops claims and kept responses,
so a round whose record was evicted runs again when it is retried: its ``maxmemory-policy`` is
read (from ``INFO memory``, since managed services often disable ``CONFIG``) and anything but
``noeviction`` is refused, unless the store was opened with ``allow_eviction``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..base import StoreMisconfigured

HEALTH_KEY_TTL_MS = 10_000
"""How long the key a health check writes lives: one key per prefix, rewritten by each check."""

SAFE_POLICY = "noeviction"

WRITES_REFUSED = ("MISCONF", "NOREPLICAS", "BUSY")
"""Error replies of a Redis that refuses writes for now (a failed snapshot under
``stop-writes-on-bgsave-error``, too few replicas for ``min-replicas-to-write``, a script
running too long) besides those redis-py names (``OOM``, ``READONLY``): a health write failing
so fails the health check. Other errors (a database index out of range) are mistakes of
configuration, raised as they are."""


def health_key(prefix: str) -> str:
    """The key a health check writes (no call id starts with ``~``, so no call owns it)."""
    return f"{prefix}:~health"


def eviction_policies(info: Mapping[Any, Any]) -> set[str]:
    """The ``maxmemory_policy`` values of an ``INFO memory`` reply: one for a single Redis, one
    per node from a cluster client (a reply keyed by node); none when the server does not say."""
    found: set[str] = set()
    for key, value in info.items():
        name = key.decode() if isinstance(key, bytes) else str(key)
        if name == "maxmemory_policy":
            found.add(value.decode() if isinstance(value, bytes) else str(value))
        elif isinstance(value, Mapping):
            found |= eviction_policies(value)
    return found


def refuse_eviction(info: Mapping[Any, Any], where: str) -> None:
    """Raise `StoreMisconfigured`, in one line saying what to do, when Redis may evict keys."""
    evicting = sorted(eviction_policies(info) - {SAFE_POLICY})
    if evicting:
        raise StoreMisconfigured(
            f"Redis at {where} may evict keys (maxmemory-policy {', '.join(evicting)}), and an "
            "evicted claim lets a round run twice: set maxmemory-policy noeviction, or open "
            "the store with ?allow_eviction=yes to accept rounds that may run again"
        )
