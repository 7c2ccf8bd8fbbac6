"""`open_store`: one configuration string (or a ready store) to a `Store`.

Each backend is imported only when a URL asks for it: importing `stores` stays free of redis-py
and sqlite3.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from ._checks import check_synchronous
from ._urls import REDIS_SCHEMES, check_redis_url, redacted
from .base import Store

ACCEPTED = (
    "memory://, sqlite:///relative/path.db, sqlite:////absolute/path.db (optionally "
    "?synchronous=full), redis://host:port/db, rediss://host:port/db, "
    "unix:///path/to/redis.sock, redis+cluster://host:port (Redis URLs take an optional "
    "?prefix=...)"
)


def open_store(url_or_store: str | Store) -> Store:
    """A store from a URL, or the given store unchanged (so callers can accept either)."""
    if not isinstance(url_or_store, str):
        if isinstance(url_or_store, Store):
            return url_or_store
        raise TypeError(f"expected a store URL or a Store, got {type(url_or_store).__name__}")
    url = url_or_store.strip()
    scheme = check_url(url)  # a bad URL fails before its backend is imported
    if scheme == "memory":
        from .memory import MemoryStore

        return MemoryStore()
    if scheme == "sqlite":
        from .sqlite import SQLiteStore

        path, synchronous = _sqlite_path(url)
        return SQLiteStore(path, synchronous=synchronous)
    from .redis import RedisStore

    return RedisStore(url)  # it reads the URL's ?prefix= itself


def check_url(url: str) -> str:
    """The scheme of a store URL that `open_store` can open; ValueError saying what is wrong."""
    url = url.strip()
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme == "memory":
        if url.lower() != "memory://":
            raise ValueError("the memory store takes no host, path or options: use 'memory://'")
        return scheme
    if scheme == "sqlite":
        _sqlite_path(url)
        return scheme
    if scheme in REDIS_SCHEMES:
        check_redis_url(url)
        return scheme
    if not scheme:
        raise ValueError(
            f"{redacted(url)!r} is not a store URL (it has no scheme://); accepted forms: "
            f"{ACCEPTED}"
        )
    raise ValueError(f"unsupported store URL {redacted(url)!r}; accepted forms: {ACCEPTED}")


def _sqlite_path(url: str) -> tuple[str, str]:
    """SQLAlchemy style: three slashes then a relative path, four for an absolute one; and the
    one option, ``?synchronous=normal|full``. ``(path, synchronous)``."""
    rest, _, query = url[len("sqlite://") :].partition("?")
    if not rest.startswith("/") or "#" in url:
        raise ValueError(
            f"bad SQLite URL {url!r}: use sqlite:///relative/path.db or sqlite:////abs/path.db "
            "(no host; the one option is ?synchronous=full)"
        )
    path = rest[1:]
    if not path or path.endswith("/"):
        raise ValueError(f"SQLite URL {url!r} names no file: use sqlite:///path/to/file.db")
    options = parse_qsl(query, keep_blank_values=True)
    names = [name for name, _ in options]
    if any(name != "synchronous" for name in names) or len(names) > 1:
        raise ValueError(
            f"SQLite URL {url!r}: the one option is ?synchronous=normal or ?synchronous=full"
        )
    synchronous = options[0][1] if options else "normal"
    try:
        return path, check_synchronous(synchronous)
    except ValueError as exc:
        raise ValueError(f"SQLite URL {url!r}: {exc}") from None
