"""Host and Origin checks against DNS rebinding.

A web page can point a name it controls at 127.0.0.1 and have a browser send requests to a
server that only listens locally. Such a request names the page's host in ``Host``, and the
page in ``Origin``: a server accepts only the hosts it is configured for (the loopback names by
default), and a browser origin only when it is allowed or is itself on an allowed loopback host.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple
from urllib.parse import urlsplit

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
ORIGIN_DECISIONS = 1024
"""Distinct (``Host``, ``Origin``) pairs whose decision is remembered."""
REMEMBERED_CHARS = 512
"""A pair longer than this (a host name is at most 253 characters) is decided every time and
never remembered, so the table holds at most ``ORIGIN_DECISIONS`` small pairs."""
QUOTED_CHARS = 100
"""How much of a refused value an error message repeats."""
HOST_REFUSED = 421
"""Misdirected Request: this server does not answer for that host name."""
ORIGIN_REFUSED = 403


class OriginRefusal(NamedTuple):
    """A request refused by the checks: its HTTP status and what to configure instead."""

    status: int
    message: str


def quoted(value: str) -> str:
    """``value`` for an error message: repr'd, cut to ``QUOTED_CHARS``."""
    if len(value) <= QUOTED_CHARS:
        return repr(value)
    return f"{value[:QUOTED_CHARS]!r}... ({len(value)} characters)"


def host_only(value: str) -> str:
    """A ``Host`` value (or an origin's netloc) without its port, lowercased."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[: value.index("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class OriginPolicy:
    """The hosts and browser origins one app accepts; ``*`` in either accepts any."""

    def __init__(
        self,
        allowed_hosts: Iterable[str] | None,
        allowed_origins: Iterable[str] | None,
        extra_allowed_hosts: Iterable[str] = (),
    ) -> None:
        hosts = list(allowed_hosts) if allowed_hosts is not None else list(LOOPBACK_HOSTS)
        hosts += extra_allowed_hosts
        self.any_host = "*" in hosts
        self.allowed_hosts = {host_only(h) for h in hosts}
        origins = list(allowed_origins) if allowed_origins is not None else []
        self.any_origin = "*" in origins
        self.allowed_origins = {o.rstrip("/").lower() for o in origins if not o.endswith(":*")}
        self.any_port_origins = {o[:-2].rstrip("/").lower() for o in origins if o.endswith(":*")}
        """Origins given as ``scheme://host:*``: that scheme and host, on any port."""
        self._decisions: dict[tuple[str | None, str | None], OriginRefusal | None] = {}

    def allows_host(self, host: str) -> bool:
        """Whether ``host`` (a ``Host`` value, port and all) is one this app answers for."""
        return self.any_host or host_only(host) in self.allowed_hosts

    def refusal(self, headers: Mapping[str, str]) -> OriginRefusal | None:
        """Why the request is refused as a possible DNS-rebinding attack, or ``None``.

        A client sends the same ``Host`` and ``Origin`` on every request, so decisions are
        remembered (a bounded table: an attacker varying them only refills it).
        """
        key = (headers.get("host"), headers.get("origin"))
        try:
            return self._decisions[key]
        except KeyError:
            pass
        decision = self.decide(*key)
        if sum(len(value or "") for value in key) > REMEMBERED_CHARS:
            return decision
        if len(self._decisions) >= ORIGIN_DECISIONS:
            self._decisions.clear()
        self._decisions[key] = decision
        return decision

    def decide(self, host: str | None, origin: str | None) -> OriginRefusal | None:
        if not self.any_host and host is not None and host_only(host) not in self.allowed_hosts:
            return OriginRefusal(
                HOST_REFUSED,
                f"Host {quoted(host)} is not allowed; add it to allowed_hosts "
                "(ENGINE_ALLOWED_HOSTS)",
            )
        if origin is None or self.any_origin:
            return None
        given = origin.rstrip("/").lower()
        if given in self.allowed_origins:
            return None
        parts = urlsplit(given)
        if self.any_port_origins and f"{parts.scheme}://{host_only(parts.netloc)}" in (
            self.any_port_origins
        ):
            return None
        origin_host = host_only(parts.netloc)
        if origin_host in self.allowed_hosts and origin_host in LOOPBACK_HOSTS:
            return None
        return OriginRefusal(
            ORIGIN_REFUSED, f"Origin {quoted(origin)} is not allowed; add it to allowed_origins"
        )
