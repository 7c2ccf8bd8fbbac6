"""What a server owns while it runs: its key ring, store and store services, the fleet's
messaging, the metrics and the round runner, all built from its :class:`~engine.settings.Settings`.

The registries (tools, prompts, resources) are declared on ``MCPServer``; everything here serves
them and knows nothing of how they were declared.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio

from engine._internal.metrics import Metrics
from engine._internal.tracing import StoreSpans, Tracing
from engine.calls.runner import Principal, RoundRunner
from engine.di.overrides import DependencyOverrides
from engine.fleet.backchannel import BackChannel
from engine.fleet.bus import Bus
from engine.fleet.notifications import Notifications
from engine.fleet.sessions import SessionRegistry
from engine.handlers.tool import Tool
from engine.scope import ServerHooks
from engine.settings import Settings
from engine.state.seal import KeyRing
from engine.store_services.services import StoreServices
from engine.store_services.store_probe import StoreProbe
from engine.tasks.record_store import TaskRecords
from engine.tasks.service import Tasks
from stores.base import Store, StoreMisconfigured

log = logging.getLogger("engine.seal")

HEALTH_TIMEOUT = 2.0
"""Seconds a health check waits for the store's write probe (which may go on after)."""


class Runtime:
    """The services behind one server, built by its :class:`~engine.server_core.ServerCore`;
    ``hooks`` is what its handlers' Context reaches (that core)."""

    def __init__(
        self,
        settings: Settings,
        *,
        principal: Principal | None,
        hooks: ServerHooks,
        overrides: DependencyOverrides,
        tools: Mapping[str, Tool],
    ) -> None:
        """``tools`` are the server's, by name: a task's body runs its tool's code."""
        self.settings = settings
        self.keys = settings.keys if settings.keys is not None else _ephemeral_ring()
        self.metrics = Metrics()
        self.replica_id = settings.replica_id
        self.tracing = Tracing(
            settings.tracing.mode,
            settings.tracing.provider,
            settings.replica_id,
            on_spans=self._traced,
        )
        given = settings.store.store
        self.store: Store | None = None
        if given is not None:
            from stores import open_store  # the backend's library loads only when one is used

            self.store = open_store(given)
        self.store_probe = None if self.store is None else StoreProbe(self.store, HEALTH_TIMEOUT)
        self.owns_store = isinstance(given, str)
        """A store opened from a URL is closed with the server; a store object is the caller's."""
        self.store_services: StoreServices | None = (
            StoreServices(
                self.store,
                keys=self.keys,
                # Kept as long as a replica whose clock is off within clock_skew, either way,
                # still takes the tokens that reach them.
                ttl=settings.tokens.state_ttl + 2 * math.ceil(settings.tokens.clock_skew),
                wait_duplicates=settings.store.duplicate_wait,
                journal_ttl=settings.journal.ttl,
                metrics=self.metrics,
                lease=settings.store.claim_lease,
                journal_sample=settings.journal.sample,
                journal_max_event_bytes=settings.journal.max_event_bytes,
                journal_max_bytes=settings.journal.max_bytes,
                skew_tolerance=min(settings.tasks.lease, settings.store.claim_lease) / 4,
            )
            if self.store is not None
            else None
        )
        self.bus = Bus(self.store, f"engine:{settings.tokens.audience}")
        self.backchannel = BackChannel(
            forward=self._forward_response,
            max_pending_per_session=settings.legacy.max_pending_calls_per_session,
            max_pending_per_principal=settings.legacy.max_pending_calls_per_principal,
            max_pending=settings.legacy.max_pending_calls,
            metrics=self.metrics,
        )
        self.bus.on("response", self._accept_response)
        self.notifications = Notifications(self.bus)
        self.sessions = SessionRegistry(
            self.store,
            settings.legacy.session_ttl,
            max_per_principal=settings.legacy.max_sessions_per_principal,
            metrics=self.metrics,
        )
        self.runner = RoundRunner(
            keys=self.keys,
            tokens=settings.tokens,
            journal=settings.journal,
            spill_threshold=settings.store.spill_threshold,
            services=self.store_services,
            principal=principal,
            replica_id=settings.replica_id,
            hooks=hooks,
            overrides=overrides,
            metrics=self.metrics,
        )
        self.tasks: Tasks | None = None
        """Tasks need a store: without one, no call becomes a task."""
        if self.store is not None and self.store_services is not None:
            self.tasks = Tasks(
                tools=tools,
                runner=self.runner,
                records=TaskRecords(self.store, keys=self.keys),
                journal=self.store_services.journal,
                bus=self.bus,
                settings=settings.tasks,
                metrics=self.metrics,
            )

    def _traced(self, spans: StoreSpans) -> None:
        """Spans are recorded from now on: store operations become spans too."""
        self.metrics.store_spans = spans

    async def _forward_response(
        self, instance: str, message: dict[str, Any], session_id: str | None
    ) -> None:
        await self.bus.publish("response", instance, message, session_id)

    async def _accept_response(
        self, instance: str, message: dict[str, Any], session_id: str | None
    ) -> None:
        self.backchannel.accept_forwarded(instance, message, session_id)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The store, the relay of the notification bus, the store services' work and the
        tasks' bodies."""
        store = self.store
        if store is None:
            yield
            return
        async with contextlib.AsyncExitStack() as stack:
            if self.owns_store:
                stack.push_async_callback(store.aclose)
            await _refuse_misconfigured(store)
            tg = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(tg.cancel_scope.cancel)
            await tg.start(self.bus.relay)
            if self.store_probe is not None:
                await tg.start(self.store_probe.run)
            serve = getattr(store, "serve", None)  # optional: see stores.base.Store
            if serve is not None:
                await tg.start(serve)
            if self.store_services is not None:
                await tg.start(self.store_services.run)
                stack.push_async_callback(self.store_services.flush)
            if self.tasks is not None:
                await tg.start(self.tasks.run)
            yield

    async def health(self) -> tuple[bool, dict[str, Any]]:
        """``(healthy, details)``: the process answers and its store (if any) does too."""
        details: dict[str, Any] = {"replica": self.replica_id, "store": None}
        if self.store_probe is None:
            return True, details
        failure = await self.store_probe.check()
        if failure is not None:
            details["store"] = failure
            return False, details
        details["store"] = "ok"
        skew = None if self.store_services is None else self.store_services.clock.details()
        if skew is not None:  # leases are on the store's clock: worth a look, not a 503
            details["clock_skew"] = skew
        return True, details


async def _refuse_misconfigured(store: Store) -> None:
    """A store that answers but cannot keep its promises (a Redis that may evict keys) stops
    the server at start, saying what to change. One that does not answer yet is not waited for:
    the server starts, and ``/healthz`` reports the store until it answers."""
    try:
        with anyio.fail_after(HEALTH_TIMEOUT):
            await store.ping()
    except StoreMisconfigured:
        raise
    except Exception:  # unreachable at start, say: not a reason to stop
        return


def _ephemeral_ring() -> KeyRing:
    log.warning(
        "No requestState keys configured: using an ephemeral key. Calls that ask a question can "
        "only be resumed by this process; give every replica the same keys=[...] or ENGINE_KEYS "
        "(generate one with `python -m engine keygen`)."
    )
    return KeyRing.ephemeral_ring()


__all__ = ["Runtime"]
