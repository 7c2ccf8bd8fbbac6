from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator

import pytest

KEY = "test-secret-0123456789abcdef-0123456789abcdef"
OTHER_KEY = "another-secret-0123456789abcdef-0123456789abcdef"


DEFAULT_PORT = 8000
"""``serve``'s port when none is given: held while the suite runs (when nothing else holds it),
so a test that serves on it, and would fail on a machine where a server listens there, fails
on every machine."""
_default_port_held = pytest.StashKey[socket.socket]()


def pytest_configure(config: pytest.Config) -> None:
    """A data directory of the suite's own, for every server and command it starts: the default
    store and the kept keys of ``serve`` never land in the home of whoever runs the tests."""
    os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="engine-tests-data-")
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", DEFAULT_PORT))
        holder.listen()
    except OSError:  # held already: by another run of the suite, a worker's controller, a server
        holder.close()
    else:
        config.stash[_default_port_held] = holder


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(os.environ.get("XDG_DATA_HOME", ""), ignore_errors=True)
    with contextlib.suppress(KeyError):
        config.stash[_default_port_held].close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _quiet_ephemeral_key_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)


def redis_for_tests() -> str:
    """The Redis the tests may write to: the one ``tests/redis_server.py`` started (or was
    told to use), never one found running on the machine."""
    url = os.environ.get("ENGINE_TEST_REDIS_URL")
    if not url:
        pytest.fail(
            "ENGINE_TEST_REDIS_URL is not set: run the tests through "
            "`python tests/redis_server.py -- pytest ...` (as `make test` does), which starts a "
            "private redis-server"
        )
    return url


@pytest.fixture
async def redis_url() -> AsyncIterator[str]:
    """A Redis store URL with a private key prefix, whose keys are dropped afterwards."""
    import redis.asyncio

    server = redis_for_tests()
    prefix = f"engine-test-{os.urandom(4).hex()}"
    yield f"{server}?prefix={prefix}"
    client = redis.asyncio.Redis.from_url(server)
    async for key in client.scan_iter(match=f"{prefix}:*"):
        await client.delete(key)
    await client.aclose()
