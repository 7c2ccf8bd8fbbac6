"""``ServerCore``: one server as the protocol layer, the transports and a handler's Context
reach it.

``MCPServer`` is what a user declares and runs; it builds one core from its settings and
registry, and hands the core, never itself, to every transport it starts. The core owns the
:class:`~engine.runtime.Runtime` and the round operations, and provides the three narrow
protocols the lower floors are typed against: :class:`~engine.scope.ServerHooks`,
:class:`~engine.protocol.served.Served` and :class:`~engine.transports._served.Hosted`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from engine._internal import logs
from engine.auth.provider import AccessToken, TokenVerifier
from engine.auth.settings import AuthSettings
from engine.caching import result_hints
from engine.calls.runner import Principal
from engine.completions import no_completer
from engine.di.overrides import DependencyOverrides
from engine.extension import ExtensionLike
from engine.extensions import InterceptedOperations, advertised, bound_methods, interceptors
from engine.fleet.notifications import Listener
from engine.handlers.results import ReadResourceContents
from engine.middleware import ServerMiddleware
from engine.operations import Operations
from engine.registry import Registry
from engine.runtime import Runtime
from engine.scope import RequestScope
from engine.settings import Settings

log = logging.getLogger("engine.app")  # the server's own logger, whichever module logs

REPLAY_WARNING = (
    "without a store, a round's requestState can be replayed until it expires and a tool body "
    "can run once per replay; configure store= (sqlite:///... or redis://...) for single-use "
    "rounds"
)
"""Logged once as a server with tools starts running without a store (see docs/deployment.md)."""

Lifespan = Callable[[Any], contextlib.AbstractAsyncContextManager[Any]]
"""``lifespan(server)``, called with the user's server object."""


class ServerCore:
    """What a running server is to the layers below ``MCPServer``: its identity, registry,
    round operations, runtime services, authorization and lifecycle.

    ``mcp_server`` is the user's server object: a handler reads it as ``ctx.mcp_server``, and the
    lifespan is called with it. The attributes read on every request are plain attributes.
    """

    def __init__(
        self,
        mcp_server: Any,
        settings: Settings,
        registry: Registry,
        *,
        name: str,
        instructions: str | None,
        version: str,
        principal: Principal | None,
        lifespan: Lifespan | None,
        middleware: list[ServerMiddleware[Any]],
        overrides: DependencyOverrides,
        auth: AuthSettings | None,
        token_verifier: TokenVerifier | None,
        extensions: Sequence[ExtensionLike],
    ) -> None:
        self.mcp_server = mcp_server
        self.settings = settings
        self.registry = registry
        self.tools = registry.tools
        self.instructions = instructions
        self.describe(name, version)
        self.lifespan = lifespan
        self.lifespan_context: Any = {}
        """What the lifespan yielded while the server runs; ``{}`` otherwise."""
        self.middleware = middleware
        """The user's list (``mcp.middleware``), shared: what is appended to it runs too."""
        self.dependency_overrides = overrides
        self.auth = auth
        self.token_verifier = token_verifier
        self.runtime = Runtime(
            settings,
            principal=principal,
            hooks=self,
            overrides=overrides,
            tools=registry.tools,
        )
        runtime = self.runtime
        self.keys = runtime.keys
        self.store = runtime.store
        self.bus = runtime.bus
        self.tasks = runtime.tasks
        self.backchannel = runtime.backchannel
        self.notifications = runtime.notifications
        self.sessions = runtime.sessions
        self.metrics = runtime.metrics
        self.tracing = runtime.tracing
        self.replica_id = settings.replica_id
        self.stamp_results = settings.stamp_results
        self.serves_subscriptions = settings.subscriptions
        self.legacy_answer_timeout = settings.legacy.answer_timeout
        self.result_hints = result_hints(settings.cache_hints, settings.list_ttl_ms)
        """``(ttlMs, cacheScope)`` of each cacheable method's results (engine/caching.py)."""
        self.extensions = list(extensions)
        self.extension_methods = bound_methods(self, self.extensions)
        """The request methods extensions add, by name."""
        operations = Operations(registry, runtime.runner, runtime.metrics, runtime.tasks)
        wrapping = interceptors(self.extensions)
        self.operations: Operations = (
            InterceptedOperations(self, operations, wrapping) if wrapping else operations
        )

    # --- what clients are told -------------------------------------------------------------

    def describe(self, name: str, version: str) -> None:
        """The name and version clients are told, and the ``serverInfo`` made of them once."""
        self.name = name
        self.version = version
        self.server_info: dict[str, Any] = self.settings.info.server_info(name, version)

    def capabilities(self) -> dict[str, Any]:
        capabilities: dict[str, Any] = {
            "tools": {"listChanged": True},
            "prompts": {"listChanged": True},
            "resources": {"listChanged": True, "subscribe": True},
            "logging": {},
        }
        if self.registry.completer is not None:
            capabilities["completions"] = {}
        if self.extensions:
            capabilities["extensions"] = advertised(self.extensions)
        return capabilities

    async def complete(self, params: dict[str, Any]) -> dict[str, Any]:
        """``completion/complete``: the wire ``completion`` (``METHOD_NOT_FOUND`` without a
        completer)."""
        completer = self.registry.completer
        if completer is None:
            raise no_completer()
        return await completer.complete(params)

    async def read_resource_contents(
        self, uri: str, scope: RequestScope
    ) -> list[ReadResourceContents]:
        """``ctx.read_resource``: the same registry as ``resources/read``, from inside a handler."""
        return await self.operations.read_resource_contents(uri, scope)

    # --- who asks ----------------------------------------------------------------------------

    def principal_of(self, scope: RequestScope) -> str | None:
        return self.runtime.runner.principal(scope)

    def request_principal(
        self, headers: Mapping[str, str], access_token: AccessToken | None
    ) -> str | None:
        runner = self.runtime.runner
        if runner.binder is None:
            return None
        return runner.principal(RequestScope(headers=headers, access_token=access_token))

    def declared_scopes(self) -> set[str]:
        return self.registry.declared_scopes()

    def target_scopes(self, method: Any, params: Any) -> tuple[str, ...]:
        return self.registry.target_scopes(method, params)

    # --- notifications (they reach every replica through the store's bus) -----------------

    def add_listener(self, listener: Listener) -> None:
        self.notifications.listeners.add(listener)

    def remove_listener(self, listener: Listener) -> None:
        self.notifications.listeners.discard(listener)

    async def notify_list_changed(self, kind: str) -> None:
        """Tell every open ``subscriptions/listen`` stream that a list changed."""
        await self.notifications.broadcast(f"notifications/{kind}/list_changed", {})

    async def notify_resource_updated(self, uri: str) -> None:
        await self.notifications.broadcast("notifications/resources/updated", {"uri": uri})

    async def notify_session(self, session_id: str, method: str, params: dict[str, Any]) -> None:
        """A notification for one 2025-11-25 session's standalone stream, on any replica."""
        await self.notifications.to_session(session_id, method, params)

    def add_session_stream(self, session_id: str, listener: Listener) -> None:
        self.notifications.add_session_stream(session_id, listener)

    def remove_session_stream(self, session_id: str, listener: Listener) -> None:
        self.notifications.remove_session_stream(session_id, listener)

    # --- lifecycle -----------------------------------------------------------------------------

    async def health(self) -> tuple[bool, dict[str, Any]]:
        """``(healthy, details)``: the process answers and its store (if any) does too."""
        return await self.runtime.health()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve: the token verifier's resources, the lifespan (if any), the store, and the relay
        of the notification bus."""
        logs.set_replica(self.replica_id)
        if self.tools and self.store is None:
            log.warning(REPLAY_WARNING)
        async with contextlib.AsyncExitStack() as stack:
            verifier = self.token_verifier
            if isinstance(verifier, contextlib.AbstractAsyncContextManager):
                await stack.enter_async_context(verifier)  # its HTTP client, say
            if self.lifespan is not None:
                value = await stack.enter_async_context(self.lifespan(self.mcp_server))
                self.lifespan_context = value if value is not None else {}
                stack.callback(setattr, self, "lifespan_context", {})
            await stack.enter_async_context(self.runtime.running())
            yield


__all__ = ["REPLAY_WARNING", "ServerCore"]
