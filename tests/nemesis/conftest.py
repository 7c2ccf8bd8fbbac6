"""The nemesis's short run starts a fleet and deals faults for a minute and more, so a plain
``pytest`` (``make test``) does not collect it; ``make e2e`` (``ENGINE_E2E=1``) does, as does
naming ``tests/nemesis`` or its file. The checker's own tests are quick and always collected."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.slow_suites import asked_for

HERE = Path(__file__).resolve().parent
ALWAYS = {"test_checker.py"}


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    name = collection_path.name
    if name.startswith("test_") and name not in ALWAYS and not asked_for(config, HERE):
        return True
    return None


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
