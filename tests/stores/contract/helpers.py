"""What the contract tests of every facet share: request bytes, and the TTLs of what expires."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from stores import Store

Replica = Callable[[], Awaitable[Store]]
"""Opens another store object on the same backend and data, as a second replica would."""

FP = b"\x00fingerprint-a\xff"
OTHER_FP = b"fingerprint-b"
RESPONSE = b'{"result": 1}\x00\xff binary-safe'
OWNER = b"\x00attempt-1\xff"
OTHER_OWNER = b"attempt-2"

SHORT_TTL = 0.1
"""The TTL of what a test lets expire: Redis must answer the checks made while it lives."""
PAST_SHORT_TTL = 0.13
"""What `elapse` lets pass for it to be gone: on Redis a real wait, only a little longer than the
TTL, as any delay after it only makes the entry older."""
