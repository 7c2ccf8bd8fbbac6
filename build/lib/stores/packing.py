"""msgpack encoding with a packer kept per thread.

Building a ``msgpack.Packer`` costs more than packing a round's state, claims or journal event,
and one of those is packed on every round. A packer is not safe to share between threads, so
each thread keeps its own.
"""

from __future__ import annotations

import threading
from typing import Any

import msgpack

_packers = threading.local()


def pack(value: Any) -> bytes:
    """``msgpack.packb(value, use_bin_type=True)``, reusing this thread's packer."""
    try:
        packer = _packers.packer
    except AttributeError:
        packer = _packers.packer = msgpack.Packer(use_bin_type=True)
    return packer.pack(value)  # type: ignore[no-any-return]
