"""`SQLiteStore`: the embedded default, one file that survives restarts.

The store is one class composed of a module per facet of the `Store` protocol; the public names
are these three.
"""

from .store import SQLiteStore, create_private_directories, create_private_file

__all__ = ["SQLiteStore", "create_private_directories", "create_private_file"]
