"""The HTTP client a token verifier reaches its authorization server with.

A verifier is given an ``httpx.AsyncClient`` of the caller's (a proxy, a private CA: theirs to
configure and close), or opens one for as long as it runs with its server (``async with``), so
its requests share connections; outside that, each request opens a client of its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx


class ProviderClient:
    """The given client, or the one opened for the verifier's lifetime, or one per request."""

    def __init__(self, given: httpx.AsyncClient | None, timeout: float) -> None:
        self.given = given
        self.timeout = timeout
        self._opened: httpx.AsyncClient | None = None

    def open(self) -> None:
        """Keep a client while the verifier runs, unless the caller gave one."""
        if self.given is None and self._opened is None:
            self._opened = httpx.AsyncClient(timeout=self.timeout)

    async def close(self) -> None:
        """Close the client `open` made (a given one stays the caller's)."""
        opened, self._opened = self._opened, None
        if opened is not None:
            await opened.aclose()

    @asynccontextmanager
    async def session(self) -> AsyncIterator[httpx.AsyncClient]:
        """The client for one request: the kept one, or one for this request alone."""
        kept = self.given if self.given is not None else self._opened
        if kept is not None:
            yield kept
            return
        async with httpx.AsyncClient(timeout=self.timeout) as one_off:
            yield one_off
