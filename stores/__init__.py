"""Storage backends for resumable tool calls: one async protocol, three implementations.

``open_store("sqlite:///engine.db")`` (or ``memory://``, ``redis://...``) is the usual way in;
see docs/stores.md for what each store is for and what it guarantees.

The backends are imported on first use (``stores.RedisStore``, or `open_store` with their
scheme), so importing the package costs neither redis-py nor sqlite3.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._open import open_store
from .base import (
    DEFAULT_OP_TIMEOUT,
    BlobStore,
    BusStore,
    CallSummary,
    Claim,
    ClaimResult,
    ClaimStore,
    JournalStore,
    Store,
    StoreLifecycle,
    StoreMisconfigured,
    StoreUnavailable,
    TaskRow,
    TaskStore,
)

if TYPE_CHECKING:
    from .memory import MemoryStore
    from .redis import RedisStore
    from .sqlite import SQLiteStore

__all__ = [
    "DEFAULT_OP_TIMEOUT",
    "BlobStore",
    "BusStore",
    "CallSummary",
    "Claim",
    "ClaimResult",
    "ClaimStore",
    "JournalStore",
    "MemoryStore",
    "RedisStore",
    "SQLiteStore",
    "Store",
    "StoreLifecycle",
    "StoreMisconfigured",
    "StoreUnavailable",
    "TaskRow",
    "TaskStore",
    "open_store",
]

_LAZY = {"MemoryStore": ".memory", "RedisStore": ".redis", "SQLiteStore": ".sqlite"}
"""Public name -> the module that defines it, imported when the name is first read."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later reads skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
