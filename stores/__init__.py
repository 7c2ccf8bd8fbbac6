"""Storage backends for resumable tool calls: one async protocol, three implementations.

``open_store("sqlite:///engine.db")`` (or ``memory://``, ``redis://...``) is the usual way in;
see docs/stores.md for what each store is for and what it guarantees.
"""

from ._open import open_store
from .base import (
    DEFAULT_OP_TIMEOUT,
    CallSummary,
    Claim,
    ClaimResult,
    Store,
    StoreUnavailable,
)
from .memory import MemoryStore
from .redis import RedisStore
from .sqlite import SQLiteStore

__all__ = [
    "DEFAULT_OP_TIMEOUT",
    "CallSummary",
    "Claim",
    "ClaimResult",
    "MemoryStore",
    "RedisStore",
    "SQLiteStore",
    "Store",
    "StoreUnavailable",
    "open_store",
]
