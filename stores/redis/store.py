"""`RedisStore`, composed of a class per facet of the `Store` protocol.

Each facet's module holds its operations (their Lua is in `stores.redis.lua`);
`stores.redis.core` holds what they all run on. A call to an operation is a plain method call:
the composition adds no layer.
"""

from __future__ import annotations

from ..base import DEFAULT_OP_TIMEOUT
from .blobs import RedisBlobs
from .bus import RedisBus
from .claims import RedisClaims
from .client import RedisClient
from .journal import RedisJournal
from .tasks import RedisTasks


class RedisStore(RedisBlobs, RedisClaims, RedisJournal, RedisTasks, RedisBus):
    """A `Store` in Redis, shared by every replica that uses the same URL and prefix."""

    def __init__(
        self,
        url_or_client: str | RedisClient,
        *,
        prefix: str | None = None,
        op_timeout: float = DEFAULT_OP_TIMEOUT,
        retries: int = 3,
        max_connections: int = 100,
        poll_interval: float = 0.05,
        purge_interval: float = 60.0,
        allow_eviction: bool = False,
    ) -> None:
        """Connect lazily to `url_or_client`; a client passed in stays the caller's to close.

        The key prefix is ``prefix``, or the URL's ``?prefix=`` (as in `open_store`), or
        ``engine``. A Redis whose ``maxmemory-policy`` is not ``noeviction`` fails `ping`
        with `StoreMisconfigured` unless ``allow_eviction`` (or the URL's
        ``?allow_eviction=yes``) accepts that an evicted claim lets a round run twice. Each
        open subscription holds one of the `max_connections` for its lifetime.
        `wait_complete` re-reads the round every `poll_interval` s to see completions made by
        other replicas (completions in this process wake it at once).
        """
        super().__init__(
            url_or_client,
            prefix=prefix,
            op_timeout=op_timeout,
            retries=retries,
            max_connections=max_connections,
            allow_eviction=allow_eviction,
        )
        self._open_claims(poll_interval)
        self._open_journal(purge_interval)
        self._open_tasks()
        self._open_bus()

    def __repr__(self) -> str:
        return f"RedisStore({type(self._client).__name__}, prefix={self.prefix!r})"
