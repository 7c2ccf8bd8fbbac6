from __future__ import annotations

import logging

import pytest

KEY = "test-secret-0123456789abcdef-0123456789abcdef"
OTHER_KEY = "another-secret-0123456789abcdef-0123456789abcdef"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _quiet_ephemeral_key_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
