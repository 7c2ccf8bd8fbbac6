"""Random bytes for ids and nonces: the operating system's CSPRNG, read 4 KiB at a time.

Every round draws a call id or a nonce; a system call for each costs more than the rest of
sealing a token. The bytes are the same CSPRNG output, handed out once each. A forked child
starts with an empty pool, so parent and child never hand out the same bytes.
"""

from __future__ import annotations

import os
import threading


class RandomPool:
    """Hands out fresh random bytes from a buffer refilled by ``os.urandom``."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._pool = b""
        self._offset = 0
        self._lock = threading.Lock()

    def take(self, n: int) -> bytes:
        with self._lock:
            offset = self._offset
            end = offset + n
            if end > len(self._pool):
                self._pool = os.urandom(max(self.size, n))
                offset, end = 0, n
            self._offset = end
            return self._pool[offset:end]

    def forget(self) -> None:
        """Drop what is buffered (in a forked child, the parent hands those bytes out)."""
        self._pool = b""
        self._offset = 0
        self._lock = threading.Lock()


_pool = RandomPool()
os.register_at_fork(after_in_child=_pool.forget)
random_bytes = _pool.take
"""``random_bytes(n)``: ``n`` fresh bytes from the operating system's CSPRNG."""
