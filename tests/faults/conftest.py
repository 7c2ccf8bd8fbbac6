"""Fault tests on real processes: stores that cannot write, held locks, full and failing disks;
replicas paused (SIGSTOP) or with their clocks set ahead (libfaketime), Redis killed.

They start servers, Redis servers and filesystems (a tmpfs, a loop-mounted ext4: the tests run
as root, as CI does), and take minutes, so a plain ``pytest`` (``make test``) does not collect
them; ``make e2e`` (``ENGINE_E2E=1``) does, as does naming ``tests/faults`` or one of its files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.slow_suites import asked_for

HERE = Path(__file__).resolve().parent


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.name.startswith("test_") and not asked_for(config, HERE):
        return True
    return None


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
