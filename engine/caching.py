"""Caching hints: how long a client may keep a result of a cacheable method, and for whom.

Results of ``server/discover``, the four listings and ``resources/read`` carry ``ttlMs`` and
``cacheScope`` (2026-07-28). ``MCPServer(cache_hints={method: CacheHint(...)})`` sets them per
method; a method without a hint keeps the server's default (``list_ttl_ms``, ``"private"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

CACHEABLE_METHODS = (
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
)
"""The methods whose results carry caching hints."""

Scope = Literal["public", "private"]


@dataclass(frozen=True, slots=True)
class CacheHint:
    """``ttl_ms``: milliseconds a result stays fresh (0: stale at once). ``scope``:
    ``"public"`` when one caller's result may serve another, ``"private"`` when it may not."""

    ttl_ms: int = 0
    scope: Scope = "private"

    def __post_init__(self) -> None:
        if isinstance(self.ttl_ms, bool) or not isinstance(self.ttl_ms, int) or self.ttl_ms < 0:
            raise ValueError(f"ttl_ms must be a whole number of milliseconds, got {self.ttl_ms!r}")
        if self.scope not in ("public", "private"):
            raise ValueError(f"scope must be 'public' or 'private', got {self.scope!r}")

    @classmethod
    def of(cls, value: Any) -> CacheHint:
        """A hint from ours, a dict of its fields, or another object with ``ttl_ms`` and
        ``scope`` (the official ``CacheHint``)."""
        if isinstance(value, CacheHint):
            return value
        if isinstance(value, Mapping):
            return cls(**value)
        if hasattr(value, "ttl_ms"):
            return cls(value.ttl_ms, getattr(value, "scope", "private"))
        raise TypeError(f"a cache hint is a CacheHint(ttl_ms=..., scope=...), got {value!r}")


def cache_hints_of(given: Mapping[Any, Any] | None) -> dict[str, CacheHint]:
    """``cache_hints=`` checked: every key a cacheable method, every value a hint."""
    if not given:
        return {}
    if not isinstance(given, Mapping):
        raise TypeError(f"cache_hints is a dict of method to CacheHint, got {given!r}")
    unknown = [repr(method) for method in given if method not in CACHEABLE_METHODS]
    if unknown:
        raise ValueError(
            f"cache_hints: {', '.join(unknown)} cannot carry caching hints; the methods that "
            f"can are {', '.join(CACHEABLE_METHODS)}"
        )
    return {method: CacheHint.of(hint) for method, hint in given.items()}


def result_hints(given: Mapping[str, CacheHint], ttl_ms: int) -> dict[str, tuple[int, str]]:
    """``(ttlMs, cacheScope)`` of each cacheable method's results: its hint in ``given``, else
    ``ttl_ms`` (the server's ``list_ttl_ms``) and private."""
    return {
        method: (given[method].ttl_ms, given[method].scope)
        if method in given
        else (ttl_ms, "private")
        for method in CACHEABLE_METHODS
    }


__all__ = ["CACHEABLE_METHODS", "CacheHint", "cache_hints_of", "result_hints"]
