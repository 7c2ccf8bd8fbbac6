from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator

import pytest

KEY = "test-secret-0123456789abcdef-0123456789abcdef"
OTHER_KEY = "another-secret-0123456789abcdef-0123456789abcdef"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _quiet_ephemeral_key_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)


TEST_REDIS = os.environ.get("ENGINE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture
async def redis_url() -> AsyncIterator[str]:
    """A Redis store URL with a private key prefix, whose keys are dropped afterwards."""
    import redis.asyncio

    prefix = f"engine-test-{os.urandom(4).hex()}"
    yield f"{TEST_REDIS}?prefix={prefix}"
    client = redis.asyncio.Redis.from_url(TEST_REDIS)
    async for key in client.scan_iter(match=f"{prefix}:*"):
        await client.delete(key)
    await client.aclose()
