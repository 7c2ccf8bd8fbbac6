"""`SQLiteStore`, composed of a class per facet of the `Store` protocol, and the private file
modes it creates its files with.

Each facet's module holds its operations and their SQL; `stores.sqlite.core` holds what they
all run on. A call to an operation is a plain method call: the composition adds no layer.
"""

from __future__ import annotations

import os

from .._bus import DEFAULT_BUFFER
from ..base import DEFAULT_OP_TIMEOUT
from . import schema as sql
from .blobs import SQLiteBlobs
from .bus import SQLiteBus
from .claims import SQLiteClaims
from .journal import SQLiteJournal
from .tasks import SQLiteTasks


class SQLiteStore(SQLiteBlobs, SQLiteClaims, SQLiteJournal, SQLiteTasks, SQLiteBus):
    """A `Store` in one SQLite file; pass the same path again to pick up where it left off."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        op_timeout: float = DEFAULT_OP_TIMEOUT,
        bus_buffer: int = DEFAULT_BUFFER,
        purge_interval: float = 60.0,
        poll_interval: float = 0.1,
        clock: sql.Clock | None = None,
        synchronous: str = "normal",
    ) -> None:
        """Open (creating if needed) the database at `path`: blocking file I/O, so open at startup.

        `synchronous` is ``"normal"`` (a commit survives a crash of the process, not a power
        loss or an OS crash: the last ones before it may be lost) or ``"full"`` (each commit
        syncs the log first, so claims and completions survive those too, at a cost per commit).

        `poll_interval` is how often `wait_complete` re-reads a round, which is how it sees
        completions made by other processes on the same file.
        `clock` reads the time, in seconds, for expiry and purges; defaults to the wall clock
        (the file outlives the process), and purges to the monotonic clock.
        """
        super().__init__(
            path,
            op_timeout=op_timeout,
            purge_interval=purge_interval,
            clock=clock,
            synchronous=synchronous,
        )
        self._open_claims(poll_interval)
        self._open_bus(bus_buffer)

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"


def create_private_file(path: str | os.PathLike[str]) -> bool:
    """Create a store file as `SQLiteStore` does: 0600, its missing directories 0700, whatever
    the umask. True when it was created; an existing file keeps its mode."""
    return sql.make_private(os.fspath(path))


def create_private_directories(path: str | os.PathLike[str]) -> None:
    """The missing directories above the store file `path`, created 0700 as `SQLiteStore` does."""
    sql.make_private_directories(os.fspath(path))
