"""Which protocol era a client message belongs to, decided the same way on every transport.

A 2026-07-28 request carries its version in ``params._meta``. ``initialize`` opens the
2025-11-25 era; so do, over HTTP, an ``MCP-Session-Id`` and a 2025-era ``MCP-Protocol-Version``
header; and on a connection (stdio), every message after a 2025-11-25 ``initialize``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from engine.protocol.modern import LEGACY_HEADER_VERSIONS, META_VERSION


class Era(enum.Enum):
    """A protocol era, named by the date of its specification."""

    V2025_11_25 = "2025-11-25"
    """Sessions opened by ``initialize``; questions asked on the back-channel
    (:mod:`engine.protocol.legacy`)."""
    V2026_07_28 = "2026-07-28"
    """Every request carries its version and capabilities; questions come back as
    ``input_required`` (:mod:`engine.protocol.modern`)."""


def era_of(raw: Any, *, headers: Mapping[str, str] | None = None, in_session: bool = False) -> Era:
    """The era ``raw`` (one decoded message) is served in.

    ``headers`` are the HTTP request's (lower-case names); ``in_session`` says that this
    connection already opened a 2025-11-25 session (stdio).
    """
    if not isinstance(raw, dict):
        return Era.V2026_07_28
    params = raw.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict) and META_VERSION in meta:
        return Era.V2026_07_28
    if raw.get("method") == "initialize" or in_session:
        return Era.V2025_11_25
    if headers is None:
        return Era.V2026_07_28
    if "mcp-session-id" in headers:
        return Era.V2025_11_25
    if headers.get("mcp-protocol-version", "").strip() in LEGACY_HEADER_VERSIONS:
        return Era.V2025_11_25
    return Era.V2026_07_28


__all__ = ["LEGACY_HEADER_VERSIONS", "Era", "era_of"]
