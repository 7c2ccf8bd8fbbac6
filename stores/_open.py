"""`open_store`: one configuration string (or a ready store) to a `Store`."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode

from .base import Store
from .memory import MemoryStore
from .redis import RedisStore
from .sqlite import SQLiteStore

ACCEPTED = (
    "memory://, sqlite:///relative/path.db, sqlite:////absolute/path.db, "
    "redis://host:port/db, rediss://host:port/db, unix:///path/to/redis.sock, "
    "redis+cluster://host:port (Redis URLs take an optional ?prefix=...)"
)


def open_store(url_or_store: str | Store) -> Store:
    """A store from a URL, or the given store unchanged (so callers can accept either)."""
    if not isinstance(url_or_store, str):
        if isinstance(url_or_store, Store):
            return url_or_store
        raise TypeError(f"expected a store URL or a Store, got {type(url_or_store).__name__}")
    url = url_or_store.strip()
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme == "memory":
        if url.lower() != "memory://":
            raise ValueError("the memory store takes no host, path or options: use 'memory://'")
        return MemoryStore()
    if scheme == "sqlite":
        return SQLiteStore(_sqlite_path(url))
    if scheme in ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster"):
        url, prefix = _pop_prefix(url)
        return RedisStore(url, prefix=prefix)
    raise ValueError(f"unsupported store URL {_redacted(url)!r}; accepted forms: {ACCEPTED}")


def _redacted(url: str) -> str:
    """URLs go into error messages and logs; passwords must not."""
    return re.sub(r"(//[^/@]*?:)[^/@]*@", r"\1***@", url)


def _sqlite_path(url: str) -> str:
    """SQLAlchemy style: three slashes then a relative path, four for an absolute one."""
    rest = url[len("sqlite://") :]
    if not rest.startswith("/") or "?" in rest or "#" in rest:
        raise ValueError(
            f"bad SQLite URL {url!r}: use sqlite:///relative/path.db or sqlite:////abs/path.db "
            "(no host, no options)"
        )
    path = rest[1:]
    if not path or path.endswith("/"):
        raise ValueError(f"SQLite URL {url!r} names no file: use sqlite:///path/to/file.db")
    return path


def _pop_prefix(url: str) -> tuple[str, str]:
    """Take our ``prefix`` option out; the remaining options are redis-py's."""
    base, _, query_string = url.partition("?")  # not urlunsplit: it mangles unix:///path
    query = parse_qsl(query_string, keep_blank_values=True)
    prefixes = [value for name, value in query if name == "prefix"]
    if len(prefixes) > 1 or (prefixes and not prefixes[0]):
        raise ValueError(f"Redis URL {_redacted(url)!r}: give at most one non-empty ?prefix=")
    rest = urlencode([(name, value) for name, value in query if name != "prefix"])
    return (f"{base}?{rest}" if rest else base), prefixes[0] if prefixes else "engine"
