"""Fixtures the Streamable HTTP tests share (``test_http_*.py``, ``test_asgi.py``).

``client`` and ``shop`` serve an app in-process. ``_no_errors_logged`` is not autouse, so the
stdio, serving and socket-write tests here are left alone: an HTTP test module asks for it with
``pytestmark = [..., pytest.mark.usefixtures("_no_errors_logged")]``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from examples import conformance_server
from examples.bookshop import build
from tests.conftest import KEY
from tests.http_helpers import REPLICA, asgi_client

conformance = conformance_server.mcp


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    """The conformance fixtures, served in-process."""
    async with asgi_client(conformance.streamable_http_app()) as client:
        yield client


@pytest.fixture
async def shop() -> AsyncIterator[httpx.AsyncClient]:
    """The bookshop, on a replica named ``replica-7``."""
    app = build(keys=[KEY], replica_id=REPLICA).streamable_http_app()
    async with asgi_client(app) as client:
        yield client


@pytest.fixture
def _no_errors_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """No test here makes the engine or uvicorn log an error (an exception in the app, say)."""
    yield
    errors = [r.getMessage() for r in caplog.get_records("call") if r.levelno >= logging.ERROR]
    assert errors == []
