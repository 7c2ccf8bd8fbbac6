"""Talking to Redis for `RedisStore`: clients from URLs, error classes, subscriptions."""

from __future__ import annotations

import inspect
import logging
from typing import Any

import anyio
from redis import exceptions as rx
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.client import PubSub
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from .._urls import redacted

log = logging.getLogger(__name__)

RedisClient = Redis | RedisCluster

UNAVAILABLE = (
    rx.ConnectionError,  # also BusyLoadingError (restarting), MaxConnectionsError
    rx.TimeoutError,
    rx.ClusterError,
    rx.ReadOnlyError,  # a failover demoted the node we talk to
    rx.TryAgainError,
    rx.SlotNotCoveredError,
    rx.OutOfMemoryError,
    rx.NoScriptError,  # Redis restarted between loading a script and running it
)
"""Errors that mean "not now" rather than "wrong request"."""


def client_from_url(
    url: str, *, op_timeout: float, retries: int = 3, max_connections: int = 100
) -> RedisClient:
    """A client for ``redis://``, ``rediss://``, ``unix://`` or ``redis[s]+cluster://`` URLs."""
    options: dict[str, Any] = {
        "retry": Retry(ExponentialBackoff(cap=op_timeout / 4, base=0.01), retries),
        "socket_timeout": op_timeout,
        "socket_connect_timeout": op_timeout,
        "max_connections": max_connections,
    }
    scheme, sep, rest = url.partition("://")
    if sep and scheme in ("redis+cluster", "rediss+cluster"):
        # Per-node pools, managed by the cluster client.
        try:
            return RedisCluster.from_url(f"{scheme.removesuffix('+cluster')}://{rest}", **options)
        except TypeError as exc:  # an option its constructor does not take
            raise ValueError(f"Redis URL {redacted(url)!r}: unknown option ({exc})") from None
    if sep and scheme in ("redis", "rediss", "unix"):
        pool = BlockingConnectionPool.from_url(url, timeout=op_timeout, **options)
        accepted = _keywords(pool.connection_class)
        unknown = sorted(set(pool.connection_kwargs) - accepted) if accepted is not None else []
        if unknown:
            raise ValueError(
                f"Redis URL {redacted(url)!r}: unknown option {', '.join(unknown)}; the query "
                "takes ?prefix= and redis-py's connection options (db, client_name, "
                "socket_keepalive, ...)"
            )
        return Redis.from_pool(pool)
    raise ValueError(
        f"not a Redis URL (scheme {scheme!r}); use redis://host:port/db, rediss://..., "
        "unix:///path/to/socket or redis+cluster://host:port"
    )


def _keywords(connection_class: type) -> set[str] | None:
    """The keyword arguments ``connection_class`` takes, through the ``**kwargs`` its
    ``__init__`` hands to its bases; ``None`` when the last of them takes any."""
    names: set[str] = set()
    for klass in connection_class.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        parameters = inspect.signature(init).parameters.values()
        names.update(
            p.name for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
        )
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            return names
    return None


def as_bytes(value: object, what: str) -> bytes:
    """Replies must be bytes: a str means the client decodes responses, which breaks blobs."""
    if not isinstance(value, bytes):
        raise TypeError(
            f"Redis returned {type(value).__name__} for {what}; "
            "RedisStore needs a client created with decode_responses=False"
        )
    return value


class Messages:
    """Messages of one subscription, reconnecting by itself (and quietly) after Redis restarts.

    Messages published while the subscription is disconnected are lost, as with any Redis
    pub/sub. Iteration ends when the store closes.
    """

    def __init__(self, pubsub: PubSub, channel: str, retry_cap: float) -> None:
        self._pubsub = pubsub
        self._channel = channel
        self._retry_cap = retry_cap
        self._scope: anyio.CancelScope | None = None
        self._ended = False

    def __aiter__(self) -> Messages:
        return self

    async def __anext__(self) -> bytes:
        delay = 0.05
        while not self._ended:
            with anyio.CancelScope() as self._scope:
                try:
                    message = await self._pubsub.get_message(
                        ignore_subscribe_messages=True, timeout=None
                    )
                except UNAVAILABLE as exc:
                    log_at = logging.WARNING if delay == 0.05 else logging.DEBUG
                    log.log(
                        log_at, "subscription to %r lost (%s); reconnecting", self._channel, exc
                    )
                    await anyio.sleep(delay)
                    delay = min(delay * 2, self._retry_cap)
                    continue
                if message is not None and message.get("type") == "message":
                    return as_bytes(message["data"], "a bus message")
        raise StopAsyncIteration

    def end(self) -> None:
        """Stop the iteration, waking a reader that is blocked on the connection."""
        self._ended = True
        if self._scope is not None:
            self._scope.cancel()
