"""Which protocol era a client message belongs to, decided the same way on every transport.

A 2026-07-28 request carries its version in ``params._meta``. ``initialize`` opens the
2025-11-25 era; so do, over HTTP, an ``MCP-Session-Id`` and a 2025-era ``MCP-Protocol-Version``
header; and on stdio, every message after a 2025-11-25 ``initialize``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.protocol.modern import META_VERSION

LEGACY_HEADER_VERSIONS = frozenset({"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"})


def is_legacy(
    raw: Any, *, headers: Mapping[str, str] | None = None, in_session: bool = False
) -> bool:
    """Whether ``raw`` (one decoded message) is served in the 2025-11-25 era.

    ``headers`` are the HTTP request's (lower-case names); ``in_session`` says that this
    connection already opened a 2025-11-25 session (stdio).
    """
    if not isinstance(raw, dict):
        return False
    params = raw.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict) and META_VERSION in meta:
        return False
    if raw.get("method") == "initialize" or in_session:
        return True
    if headers is None:
        return False
    if "mcp-session-id" in headers:
        return True
    return headers.get("mcp-protocol-version", "").strip() in LEGACY_HEADER_VERSIONS


__all__ = ["LEGACY_HEADER_VERSIONS", "is_legacy"]
