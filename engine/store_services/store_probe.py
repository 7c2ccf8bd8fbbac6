"""The store's write probe behind ``/healthz``: at most one running, however many checks ask.

A load balancer (or several) may check every replica every second. Each check that started its
own write would queue behind the others on a store that is slow to write (a SQLite file locked
by another process, a Redis near its memory limit), and a check would answer only once the
probes before it had: seconds past the moment it should have said 503. Here the checks that
arrive while a probe runs share the next one, which starts once it ends (so an answer is never
older than its check), and a check waits at most ``timeout`` seconds: a probe still running then
goes on in the server's task group and the check answers that the store did not answer in time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import anyio
from anyio.abc import TaskStatus

from stores.base import StoreLifecycle, StoreUnavailable

log = logging.getLogger("engine.store")

PROBE_LIMIT = 30.0
"""Seconds a probe may run before it is given up (a store whose client has no timeout)."""


STOPPED = "unavailable: the server stopped before the store answered"


@dataclass
class _Probe:
    done: anyio.Event = field(default_factory=anyio.Event)
    failure: str | None = STOPPED
    """Why the store is unavailable; ``None`` once it took the probe's write."""


class StoreProbe:
    """Runs the store's ``ping`` for the checks that ask: one running, one waiting at most."""

    def __init__(self, store: StoreLifecycle, timeout: float) -> None:
        self._store = store
        self._timeout = timeout
        self._wanted = anyio.Event()
        self._next: _Probe | None = None
        """The probe the checks waiting now share; it starts once the one running ends."""
        self._running = False

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve the checks until cancelled (with the server)."""
        self._running = True
        task_status.started()
        try:
            while True:
                await self._wanted.wait()
                self._wanted = anyio.Event()
                probe, self._next = self._next, None
                if probe is None:
                    continue
                try:
                    probe.failure = await self._ping(PROBE_LIMIT)
                finally:
                    probe.done.set()
        finally:
            self._running = False
            if self._next is not None:  # its checks are told, not left to their timeout
                self._next.done.set()

    async def check(self) -> str | None:
        """``None`` when the store took a write, else why it is unavailable."""
        if not self._running:  # a server that is not running: the check probes alone
            return await self._ping(self._timeout)
        probe = self._next
        if probe is None:
            probe = self._next = _Probe()
            self._wanted.set()
        with anyio.move_on_after(self._timeout):
            await probe.done.wait()
            return probe.failure
        return f"unavailable: no answer within {self._timeout:g} s"

    async def _ping(self, limit: float) -> str | None:
        try:
            with anyio.fail_after(limit):
                await self._store.ping()
        except StoreUnavailable as exc:
            return f"unavailable: {exc}"
        except TimeoutError:
            return f"unavailable: no answer within {limit:g} s"
        except Exception as exc:
            log.exception("the store's health probe failed unexpectedly")
            return f"unavailable: {type(exc).__name__}: {exc}"
        return None


__all__ = ["StoreProbe"]
