"""The real SQLiteStore creates its file, -wal, -shm and missing directories for the owner
only, whatever the umask; an existing file keeps its mode."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from stores import SQLiteStore


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    old = os.umask(0o000)  # the worst case: nothing masked
    try:
        yield
    finally:
        os.umask(old)


def write(path: Path) -> SQLiteStore:
    store = SQLiteStore(path)

    async def put() -> None:
        await store.put_blob("call-1", "blob-1", b"the arguments", ttl=60)

    anyio.run(put)
    return store


def side_files(path: Path) -> list[Path]:
    return [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm")]


def test_a_new_store_file_is_the_owners_only(tmp_path: Path, open_umask: None) -> None:
    path = tmp_path / "a" / "b" / "calls.sqlite3"
    store = write(path)
    try:
        for created in (path, *side_files(path)):
            assert created.exists() and mode(created) == 0o600, (created, oct(mode(created)))
        assert mode(path.parent) == 0o700 and mode(path.parent.parent) == 0o700
    finally:
        anyio.run(store.aclose)
    assert mode(path) == 0o600


def test_an_existing_directory_and_file_keep_their_modes(tmp_path: Path, open_umask: None) -> None:
    tmp_path.chmod(0o755)
    path = tmp_path / "calls.sqlite3"
    path.touch()
    path.chmod(0o644)
    store = write(path)
    try:
        assert mode(path) == 0o644
        assert mode(tmp_path) == 0o755
    finally:
        anyio.run(store.aclose)
