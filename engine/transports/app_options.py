"""What ``mcp.streamable_http_app()`` takes: this server's options, and the official names.

Code written for the official server passes ``streamable_http_path``,
``max_request_body_size``, ``transport_security`` (its ``TransportSecuritySettings``, read here
by its fields), ``host`` and the session options; each is translated once, here, into what the
app is made with. A name given in both spellings is refused rather than one silently winning.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from engine.transports._origin import LOOPBACK_HOSTS

LOOPBACK_BIND = ("127.0.0.1", "localhost", "::1")
"""Addresses whose server only local clients reach: the Host check keeps its loopback names."""


class HTTPAppOptions(TypedDict, total=False):
    """The options of ``streamable_http_app()`` (see docs/running.md)."""

    path: str
    allowed_hosts: Iterable[str] | None
    allowed_origins: Iterable[str] | None
    max_body_bytes: int
    freeze_after_startup: bool
    json_response: bool
    stateless_http: bool
    middleware: Sequence[Any] | None
    cors_origins: Iterable[str] | None
    host: str
    streamable_http_path: str
    max_request_body_size: int
    transport_security: Any
    session_idle_timeout: float | None
    max_sessions: int | None
    event_store: Any
    retry_interval: int | None
    mounts: Mapping[str, Any] | None


HTTP_APP_OPTIONS = HTTPAppOptions.__optional_keys__

SPELLINGS = {"streamable_http_path": "path", "max_request_body_size": "max_body_bytes"}
"""The official name of an option, and ours."""


@dataclass(slots=True)
class AppOptions:
    """``streamable_http_app()``'s options, sorted by what reads them."""

    endpoint: dict[str, Any] = field(default_factory=dict)
    """For :class:`~engine.transports.http.StreamableHTTPApp`."""
    middleware: Sequence[Any] | None = None
    cors_origins: Iterable[str] | None = None
    session_idle_timeout: float | None = None
    """Seconds a 2025-11-25 session lives idle, when given here."""
    max_sessions: int | None = None
    mounts: dict[str, Any] = field(default_factory=dict)
    """ASGI apps served under path prefixes beside the endpoint, by prefix."""


def app_options(given: Mapping[str, Any]) -> AppOptions:
    """``given`` (as the caller spelled them) sorted and translated; a name that is not an
    option, or one given in both spellings, raises ``TypeError``."""
    unknown = sorted(set(given) - HTTP_APP_OPTIONS)
    if unknown:
        raise TypeError(
            f"streamable_http_app() got unexpected keyword arguments: {', '.join(unknown)}; "
            f"it takes {', '.join(sorted(HTTP_APP_OPTIONS))} (see docs/running.md)"
        )
    options = dict(given)
    for official, ours in SPELLINGS.items():
        if official in options:
            if ours in options:
                raise TypeError(f"give {ours}= or {official}=, not both: they are one option")
            options[ours] = options.pop(official)
    result = AppOptions(
        middleware=options.pop("middleware", None),
        cors_origins=options.pop("cors_origins", None),
        max_sessions=options.pop("max_sessions", None),
        mounts=_mounts(options.pop("mounts", None)),
    )
    if "session_idle_timeout" in options:
        result.session_idle_timeout = _idle_timeout(options.pop("session_idle_timeout"))
    options.pop("event_store", None)  # streams are kept for resumption by the engine itself
    options.pop("retry_interval", None)
    host = options.pop("host", "127.0.0.1")
    security = options.pop("transport_security", None)
    if security is not None:
        if "allowed_hosts" in options or "allowed_origins" in options:
            raise TypeError(
                "give transport_security= or allowed_hosts= / allowed_origins=, not both: "
                "they are the same checks"
            )
        options["allowed_hosts"], options["allowed_origins"] = security_lists(security)
    elif options.get("allowed_hosts") is None and host not in LOOPBACK_BIND:
        options["allowed_hosts"] = [*LOOPBACK_HOSTS, host]
    result.endpoint = options
    return result


def security_lists(security: Any) -> tuple[list[str], list[str]]:
    """``(allowed_hosts, allowed_origins)`` of a ``TransportSecuritySettings`` (or a dict of
    its fields): ``*`` for both when its DNS-rebinding protection is off."""

    def read(name: str, default: Any) -> Any:
        if isinstance(security, Mapping):
            return security.get(name, default)
        return getattr(security, name, default)

    if not read("enable_dns_rebinding_protection", True):
        return ["*"], ["*"]
    hosts, origins = read("allowed_hosts", None), read("allowed_origins", None)
    if isinstance(hosts, str) or isinstance(origins, str):
        raise TypeError("transport_security: allowed_hosts and allowed_origins are lists")
    return list(hosts or ()), list(origins or ())


def _mounts(given: Mapping[str, Any] | None) -> dict[str, Any]:
    """``mounts``: ``{"/prefix": asgi_app}``, each prefix a path of its own."""
    mounts = dict(given or {})
    for prefix, app in mounts.items():
        if not isinstance(prefix, str) or not prefix.startswith("/") or prefix.rstrip("/") == "":
            raise ValueError(f"mounts: {prefix!r} is not a path prefix; give one like '/journal'")
        if not callable(app):
            raise TypeError(f"mounts: what {prefix!r} serves must be an ASGI app, got {app!r}")
    return {prefix.rstrip("/"): app for prefix, app in mounts.items()}


def _idle_timeout(value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(
            f"session_idle_timeout must be a positive number of seconds, got {value!r}: "
            "2025-11-25 sessions are kept in the store (or this process) until they have been "
            "idle that long, so they always expire"
        )
    return float(value)


__all__ = ["HTTP_APP_OPTIONS", "AppOptions", "HTTPAppOptions", "app_options", "security_lists"]
