"""Store URLs: our own ``?prefix=`` option of Redis URLs, and URLs safe to show."""

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
