"""Store URLs: our own options (``?prefix=`` and ``?allow_eviction=`` of Redis URLs,
``?synchronous=`` of SQLite URLs), and URLs safe to show."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode

_USERINFO_PASSWORD = re.compile(r"(//[^/?#:@]*:)[^/?#]*@")
"""The password of ``//user:password@host``, up to the host's last ``@``."""
_QUERY_PASSWORD = re.compile(r"([?&](?:password|ssl_password)=)[^&#]*")


def redacted(url: str) -> str:
    """``url`` with any password masked: URLs go into error messages and logs."""
    return _QUERY_PASSWORD.sub(r"\1***", _USERINFO_PASSWORD.sub(r"\1***@", url))


def split_prefix(url: str) -> tuple[str, str | None]:
    """``(url without our prefix option, the prefix or None)``; the other options are
    redis-py's, left in place."""
    if "#" in url:
        raise ValueError(f"Redis URL {redacted(url)!r}: remove the #fragment, it sets nothing")
    base, _, query_string = url.partition("?")  # not urlunsplit: it mangles unix:///path
    query = parse_qsl(query_string, keep_blank_values=True)
    prefixes = [value for name, value in query if name == "prefix"]
    if len(prefixes) > 1 or (prefixes and not prefixes[0]):
        raise ValueError(f"Redis URL {redacted(url)!r}: give at most one non-empty ?prefix=")
    rest = urlencode([(name, value) for name, value in query if name != "prefix"])
    return (f"{base}?{rest}" if rest else base), prefixes[0] if prefixes else None


_YES = ("yes", "true", "1", "on")
_NO = ("no", "false", "0", "off")


def split_flag(url: str, name: str) -> tuple[str, bool]:
    """``(url without the option ``name``, whether it says yes)``: ``yes``, ``true``, ``1`` or
    ``on``; ``no``, ``false``, ``0``, ``off`` or no option at all say no. Anything else, or the
    option given twice, is refused, since a misspelt yes must not quietly mean no."""
    base, _, query_string = url.partition("?")
    query = parse_qsl(query_string, keep_blank_values=True)
    values = [value.lower() for key, value in query if key == name]
    if not values:
        return url, False
    if len(values) > 1 or (values and values[0] not in _YES + _NO):
        raise ValueError(f"store URL {redacted(url)!r}: give ?{name}= once, as yes or no")
    rest = urlencode([(key, value) for key, value in query if key != name])
    return (f"{base}?{rest}" if rest else base), bool(values) and values[0] in _YES


REDIS_SCHEMES = ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster")


def check_redis_url(url: str) -> None:
    """What redis-py would take silently or fail on deep inside: a port that is not a number
    from 1 to 65535, a database index that is not a whole number from 0 (redis-py ignores
    ``/x`` and connects to database 0). An index the server does not have is its to refuse."""
    scheme, _, rest = url.partition("://")
    base, _, query = rest.partition("?")
    netloc, slash, path = base.partition("/")
    shown = redacted(url)
    databases = [value for name, value in parse_qsl(query, keep_blank_values=True) if name == "db"]
    if scheme.lower() == "unix":
        for value in databases:
            _check_db(value, shown)
        return
    hostport = netloc.rpartition("@")[2]
    port = hostport.rpartition("]")[2] if hostport.startswith("[") else hostport
    _, colon, port_text = port.partition(":")
    if colon and not (port_text.isdigit() and 1 <= int(port_text) <= 65535):
        raise ValueError(
            f"Redis URL {shown!r}: the port must be a number from 1 to 65535 (Redis "
            f"listens on 6379), got {port_text!r}"
        )
    index = path.strip("/")
    if slash and index:
        _check_db(index, shown)
    for value in databases:
        _check_db(value, shown)


def _check_db(text: str, shown: str) -> None:
    if not text.isdigit():
        raise ValueError(
            f"Redis URL {shown!r}: the database index must be a whole number from 0, as in "
            f"redis://host:6379/0, got {text!r}"
        )
