"""``MCPServer``: registries, decorators, configuration, and the operations behind each method."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import anyio

from engine._internal.metrics import Metrics
from engine.calls.runner import CallRequest, Principal, RoundReply, RoundRunner
from engine.context import RequestScope
from engine.di.overrides import DependencyOverrides
from engine.errors import INVALID_PARAMS, MCPError, ResourceError
from engine.fleet.backchannel import BackChannel
from engine.fleet.bus import Bus
from engine.fleet.notifications import Listener, Notifications
from engine.fleet.sessions import SessionRegistry
from engine.handlers import (
    Handler,
    Prompt,
    ReadResourceContents,
    Resource,
    Tool,
    contents_for_server,
    error_result,
    resource_contents,
)
from engine.protocol.errors import store_error
from engine.questions.answers import Asker
from engine.settings import env_flag, env_number
from engine.state.seal import KeyRing, KeySpec, ring_from
from engine.store_services.journal_writer import check_journal_sample
from engine.store_services.services import StoreServices
from engine.types import Icon, ToolAnnotations
from stores import Store, StoreUnavailable, open_store

log = logging.getLogger("engine.app")

F = TypeVar("F", bound=Callable[..., Any])
Lifespan = Callable[["MCPServer"], contextlib.AbstractAsyncContextManager[Any]]


class MCPServer:
    """An MCP server whose tool calls run as resumable rounds.

    ``keys`` (or ``ENGINE_KEYS``) are the secrets every replica shares so any of them can resume
    a call; without them a per-process key is generated and a warning logged. ``audience``
    defaults to ``name``: replicas of one service must use the same one.
    """

    def __init__(
        self,
        name: str = "mcp-server",
        instructions: str | None = None,
        *,
        version: str = "0.1.0",
        keys: Iterable[KeySpec] | KeyRing | None = None,
        audience: str | None = None,
        principal: Principal | None = None,
        state_ttl: int = 600,
        max_token_chars: int = 64 * 1024,
        max_inline_state: int | None = None,
        trust_unsolicited_answers: bool = False,
        lifespan: Lifespan | None = None,
        list_ttl_ms: int = 0,
        replica_id: str | None = None,
        store: str | Store | None = None,
        spill_threshold: int = 4 * 1024,
        journal_arguments: bool | None = None,
        journal_ttl: float = 24 * 3600,
        journal_sample: float | None = None,
        duplicate_wait: float = 2.0,
        claim_lease: float = 30.0,
        session_ttl: float = 3600,
        legacy_answer_timeout: float = 300,
    ) -> None:
        if int(state_ttl) < 1:
            raise ValueError("state_ttl must be a whole number of seconds, at least 1")
        self.name = name
        self.instructions = instructions
        self.version = version
        self.keys = ring_from(keys)
        self.audience = audience or name
        self.principal = principal
        self.state_ttl = int(state_ttl)
        self.max_token_chars = max_token_chars
        # A sealed token is about 4/3 of the state plus ~100 characters of claims: the default
        # keeps every token this server mints under the cap it enforces on the way in.
        self.max_inline_state = (
            max_inline_state if max_inline_state is not None else max_token_chars * 3 // 4 - 256
        )
        self.trust_unsolicited_answers = trust_unsolicited_answers
        self.lifespan = lifespan
        self.lifespan_context: Any = {}
        self.list_ttl_ms = list_ttl_ms
        self.replica_id = replica_id or os.environ.get("ENGINE_REPLICA_ID") or f"pid-{os.getpid()}"
        self.dependency_overrides = DependencyOverrides()
        self.metrics = Metrics()
        store = store if store is not None else os.environ.get("ENGINE_STORE") or None
        self.store: Store | None = open_store(store) if store is not None else None
        self._owns_store = isinstance(store, str)
        """A store opened from a URL is closed with the server; a store object is the caller's."""
        self.spill_threshold = spill_threshold
        if journal_arguments is None:
            journal_arguments = env_flag("ENGINE_JOURNAL_ARGUMENTS", default=False)
        self.journal_arguments = journal_arguments
        if journal_sample is None:
            journal_sample = env_number("ENGINE_JOURNAL_SAMPLE", default=1.0, hint="from 0 to 1")
        journal_sample = check_journal_sample(journal_sample)
        self.store_services: StoreServices | None = (
            StoreServices(
                self.store,
                ttl=self.state_ttl,
                wait_duplicates=duplicate_wait,
                journal_ttl=journal_ttl,
                metrics=self.metrics,
                lease=claim_lease,
                journal_sample=journal_sample,
            )
            if self.store is not None
            else None
        )
        self.bus = Bus(self.store, f"engine:{self.audience}")
        self.backchannel = BackChannel(forward=self._forward_response)
        self.bus.on("response", self._accept_response)
        self.notifications = Notifications(self.bus)
        self.sessions = SessionRegistry(self.store, session_ttl)
        self.legacy_answer_timeout = legacy_answer_timeout
        self._tools: dict[str, Tool] = {}
        self._completer: Callable[..., Any] | None = None
        self._prompts: dict[str, Prompt] = {}
        self._resources: dict[str, Resource] = {}
        self._templates: dict[str, Resource] = {}
        self.rounds = RoundRunner(self)

    # --- registration ---------------------------------------------------------------------------

    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        icons: list[Icon] | None = None,
        meta: dict[str, Any] | None = None,
        structured_output: bool | None = None,
        input_schema: dict[str, Any] | None = None,
    ) -> Callable[[F], F]:
        """Register a function as a tool; its signature is analysed now, not at call time.

        ``input_schema`` replaces the listed schema (the arguments are still validated against
        the function's parameters).
        """
        if callable(name):
            raise TypeError("Use @mcp.tool() with parentheses")

        def decorator(fn: F) -> F:
            self.add_tool(
                fn,
                name=name,
                title=title,
                description=description,
                annotations=annotations,
                icons=icons,
                meta=meta,
                structured_output=structured_output,
                input_schema=input_schema,
            )
            return fn

        return decorator

    def add_tool(self, fn: Callable[..., Any], **options: Any) -> Tool:
        """Register a plain function as a tool, exactly as ``@mcp.tool()`` would."""
        tool = Tool(fn, **options)
        self._tools[tool.name] = tool
        return tool

    def remove_tool(self, name: str) -> None:
        if self._tools.pop(name, None) is None:
            raise KeyError(f"Unknown tool: {name}")

    def prompt(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        icons: list[Icon] | None = None,
    ) -> Callable[[F], F]:
        if callable(name):
            raise TypeError("Use @mcp.prompt() with parentheses")

        def decorator(fn: F) -> F:
            self.add_prompt(fn, name=name, title=title, description=description, icons=icons)
            return fn

        return decorator

    def add_prompt(self, fn: Callable[..., Any], **options: Any) -> Prompt:
        prompt = Prompt(fn, **options)
        self._prompts[prompt.name] = prompt
        return prompt

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        icons: list[Icon] | None = None,
    ) -> Callable[[F], F]:
        def decorator(fn: F) -> F:
            self.add_resource(
                fn,
                uri,
                name=name,
                title=title,
                description=description,
                mime_type=mime_type,
                icons=icons,
            )
            return fn

        return decorator

    def add_resource(self, fn: Callable[..., Any], uri: str, **options: Any) -> Resource:
        resource = Resource(fn, uri, **options)
        if resource.is_template:
            self._templates[uri] = resource
        else:
            self._resources[uri] = resource
        return resource

    # --- listings -------------------------------------------------------------------------------

    @property
    def tools(self) -> dict[str, Tool]:
        return self._tools

    @property
    def prompts(self) -> dict[str, Prompt]:
        return self._prompts

    @property
    def resources(self) -> dict[str, Resource]:
        """Resources at fixed URIs, by URI."""
        return self._resources

    @property
    def resource_templates(self) -> dict[str, Resource]:
        """Resource templates, by URI template."""
        return self._templates

    def capabilities(self) -> dict[str, Any]:
        return {
            "tools": {"listChanged": True},
            "prompts": {"listChanged": True},
            "resources": {"listChanged": True, "subscribe": True},
            "completions": {},
            "logging": {},
        }

    def list_tools(self) -> list[dict[str, Any]]:
        return [tool.listing for tool in self._tools.values()]

    def list_prompts(self) -> list[dict[str, Any]]:
        return [prompt.listing for prompt in self._prompts.values()]

    def list_resources(self) -> list[dict[str, Any]]:
        return [resource.listing for resource in self._resources.values()]

    def list_resource_templates(self) -> list[dict[str, Any]]:
        return [template.listing for template in self._templates.values()]

    # --- operations -----------------------------------------------------------------------------

    def call_tool(self, request: CallRequest, asker: Asker | None = None) -> Awaitable[RoundReply]:
        """One round of a tool call (awaitable; a plain function so that a round is one
        coroutine less deep)."""
        tool = self._tools.get(request.target)
        if tool is None:
            return _replied(RoundReply("error", error=f"Unknown tool: {request.target}"))
        return self.rounds.run(tool, request, asker=asker, convert=tool.result)

    async def get_prompt(self, request: CallRequest, asker: Asker | None = None) -> RoundReply:
        prompt = self._prompts.get(request.target)
        if prompt is None:
            raise MCPError(
                INVALID_PARAMS, f"Unknown prompt: {request.target}", {"name": request.target}
            )
        return await self.rounds.run(prompt, request, asker=asker, convert=prompt.result)

    def find_resource(self, uri: str) -> tuple[Resource, dict[str, str]] | None:
        resource = self._resources.get(uri)
        if resource is not None:
            return resource, {}
        for template in self._templates.values():
            params = template.match(uri)
            if params is not None:
                return template, params
        return None

    async def read_resource(self, request: CallRequest, asker: Asker | None = None) -> RoundReply:
        uri = request.target
        found = self.find_resource(uri)
        if found is None:
            raise MCPError(INVALID_PARAMS, f"Unknown resource: {uri}", {"uri": uri})
        resource, params = found
        request.arguments = params

        def convert(value: Any) -> dict[str, Any]:
            return {"contents": resource_contents(uri, value, resource.mime_type)}

        return await self.rounds.run(resource, request, asker=asker, convert=convert)

    async def read_resource_contents(
        self, uri: str, scope: RequestScope
    ) -> list[ReadResourceContents]:
        """``ctx.read_resource``: the same registry as ``resources/read``, from inside a handler."""
        request = CallRequest("resources/read", uri, None, None, None, scope)
        try:
            reply = await self.read_resource(request)
        except MCPError as exc:
            raise ResourceError(exc.message) from None
        except StoreUnavailable as exc:  # what a client would get, as the handler's error
            raise ResourceError(store_error(exc, self.metrics).message) from None
        if reply.kind != "complete":
            raise ResourceError(
                f"Resource {uri!r} asks the client a question, so it can only be read by a "
                "client, not from inside a handler"
            )
        return contents_for_server(reply.value["contents"])

    # --- completion -----------------------------------------------------------------------------

    def completion(self) -> Callable[[F], F]:
        """Register the function that suggests values for prompt and template arguments.

        It receives ``(ref, argument, context)`` as dicts and returns a list of strings.
        """

        def decorator(fn: F) -> F:
            self._completer = fn
            return fn

        return decorator

    async def complete(
        self, ref: dict[str, Any], argument: dict[str, Any], context: Any
    ) -> list[str]:
        completer = self._completer
        if completer is None:
            return []
        values = completer(ref, argument, context)
        if hasattr(values, "__await__"):
            values = await values
        return [str(v) for v in (values or [])]

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

    async def _forward_response(
        self, instance: str, message: dict[str, Any], session_id: str | None
    ) -> None:
        await self.bus.publish("response", instance, message, session_id)

    async def _accept_response(
        self, instance: str, message: dict[str, Any], session_id: str | None
    ) -> None:
        self.backchannel.accept_forwarded(instance, message, session_id)

    # --- running ------------------------------------------------------------------------------

    def streamable_http_app(self, **options: Any) -> Any:
        """A plain ASGI application serving this server on ``/mcp`` (see ``docs/running.md``)."""
        from engine.transports.http import StreamableHTTPApp

        return StreamableHTTPApp(self, **options)

    def run(
        self,
        transport: str = "stdio",
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        drain_timeout: float | None = None,
        uvicorn_options: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> None:
        """Serve until interrupted: ``"stdio"`` (the default) or ``"streamable-http"``.

        Over HTTP, SIGTERM drains: no new connections, requests in flight finish (within
        ``drain_timeout`` seconds, ``ENGINE_DRAIN_TIMEOUT``, default 25), then exit status 0.
        ``uvicorn_options`` go to uvicorn's ``Config`` (``loop``, ``http``, ``log_level``,
        ``access_log``...; a ``timeout_graceful_shutdown`` there wins over ``drain_timeout``);
        ``options`` to :meth:`streamable_http_app`. uvicorn's access log is off unless asked for
        there or by ``ENGINE_ACCESS_LOG=1``. The process is the server's, so what exists
        once it has started is left out of later garbage collections (``freeze_after_startup``;
        ``ENGINE_GC_FREEZE=0`` turns it off).
        """
        if transport == "stdio":
            from engine.transports.stdio import serve_stdio

            anyio.run(serve_stdio, self)
            return
        if transport not in ("streamable-http", "http"):
            raise ValueError(f"Unknown transport {transport!r}: use 'stdio' or 'streamable-http'")
        from engine.transports.serving import serve

        given = dict(uvicorn_options or {})
        clashing = sorted({"app", "app_dir", "host", "port", "uds", "fd", "lifespan"} & set(given))
        if clashing:
            raise ValueError(
                f"uvicorn_options cannot set {', '.join(clashing)}: run() serves this server's "
                "app on the host and port passed to it, and always runs its lifespan, since it "
                "starts the server's store"
            )
        if given.get("reload") or (given.get("workers") or 1) > 1:
            raise ValueError(
                "uvicorn_options cannot ask for reload or several workers: uvicorn needs an "
                "import string for those. Run `uvicorn module:app --workers N` on "
                "mcp.streamable_http_app(), or start one process per replica"
            )
        allowed = list(options.pop("allowed_hosts", [])) or None
        if allowed is None and host not in ("127.0.0.1", "localhost", "::1"):
            allowed = ["127.0.0.1", "localhost", "::1", host]
        options.setdefault("freeze_after_startup", env_flag("ENGINE_GC_FREEZE", default=True))
        app = self.streamable_http_app(allowed_hosts=allowed, **options)
        if drain_timeout is None:
            drain_timeout = float(os.environ.get("ENGINE_DRAIN_TIMEOUT", "25"))
        # uvicorn drains on SIGTERM, then re-raises it with the handler it found: make that one
        # a clean exit, so a drained replica ends with status 0 rather than 143.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        settings: dict[str, Any] = {
            "log_level": "info",
            # A line per request through logging costs about a third of a replica's
            # throughput; the proxy in front logs each request already.
            "access_log": env_flag("ENGINE_ACCESS_LOG", default=False),
            "timeout_graceful_shutdown": max(1, round(drain_timeout)),
            **given,
        }
        serve(app, host=host, port=port, settings=settings)

    async def health(self) -> tuple[bool, dict[str, Any]]:
        """``(healthy, details)``: the process answers and its store (if any) does too."""
        details: dict[str, Any] = {"replica": self.replica_id, "store": None}
        if self.store is None:
            return True, details
        try:
            with anyio.fail_after(2):
                await self.store.ping()
        except (StoreUnavailable, TimeoutError) as exc:
            details["store"] = f"unavailable: {exc}"
            return False, details
        details["store"] = "ok"
        return True, details

    # --- lifecycle ------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[MCPServer]:
        """Serve: the lifespan (if any), the store, and the relay of the notification bus."""
        async with contextlib.AsyncExitStack() as stack:
            if self.lifespan is not None:
                value = await stack.enter_async_context(self.lifespan(self))
                self.lifespan_context = value if value is not None else {}
                stack.callback(setattr, self, "lifespan_context", {})
            if self.store is not None:
                if self._owns_store:
                    stack.push_async_callback(self.store.aclose)
                tg = await stack.enter_async_context(anyio.create_task_group())
                stack.callback(tg.cancel_scope.cancel)
                await tg.start(self.bus.relay)
                serve = getattr(self.store, "serve", None)  # optional: see stores.base.Store
                if serve is not None:
                    await tg.start(serve)
                if self.store_services is not None:
                    await tg.start(self.store_services.run)
                    stack.push_async_callback(self.store_services.flush)
            yield self


async def _replied(reply: RoundReply) -> RoundReply:
    return reply


__all__ = ["DependencyOverrides", "Handler", "MCPServer", "error_result"]
