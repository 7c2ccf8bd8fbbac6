"""``MCPServer``: what a user declares (tools, prompts, resources), and how to run it.

It holds what users call: the registries (:class:`~engine.registry.Registry`), their decorators,
the official server's API and ``run``. The server as the protocol layer and the transports reach
it is a :class:`~engine.server_core.ServerCore` (``mcp.core``), which owns what a running server
owns (:class:`~engine.runtime.Runtime`); the transports receive the core, never the ``MCPServer``.
Its configuration is in :class:`~engine.settings.Settings`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar, Unpack

import anyio

from engine import direct
from engine import types as wire
from engine._internal import logs
from engine._internal.keywords import refuse_unknown
from engine.auth.provider import TokenVerifier
from engine.auth.settings import AuthSettings
from engine.calls.runner import Principal, token_principal
from engine.completions import Completer
from engine.context import Context, ServerAPI
from engine.di.overrides import DependencyOverrides
from engine.extensions import checked_extensions, register_contributions
from engine.fleet.notifications import Listener
from engine.handlers.base import HandlerOptions
from engine.handlers.prompt import Prompt
from engine.handlers.resource import Resource, ResourceObject, ResourceOptions, resource_of
from engine.handlers.results import ReadResourceContents
from engine.handlers.tool import Tool, ToolOptions
from engine.middleware import ServerMiddleware, checked_middleware
from engine.registry import Registry
from engine.request_state import RequestStateSecurity
from engine.resources.security import DEFAULT_RESOURCE_SECURITY, ResourceSecurity
from engine.resources.uri_template import UriTemplate
from engine.server_core import ServerCore
from engine.settings import SERVER_OPTIONS, InfoSettings, ServerOptions, Settings
from engine.state.seal import KeyRing
from engine.transports._routes import Routes
from engine.transports.app_options import HTTPAppOptions
from engine.transports.session_manager import SessionManager
from engine.types import Icon
from stores.base import Store

if TYPE_CHECKING:
    import socket

    from engine.transports.official_client import OfficialClientConnections
    from engine.transports.starlette_app import MCPStarlette

SSE_NOT_SERVED = (
    "the HTTP+SSE transport of protocol 2024-11-05 (GET /sse, POST /messages/) is not served: "
    "its responses travel on one process's open stream, which no other replica can answer. "
    "Serve Streamable HTTP instead, which current clients speak: mcp.streamable_http_app(), "
    'or mcp.run("streamable-http")'
)

F = TypeVar("F", bound=Callable[..., Any])
if TYPE_CHECKING:
    from typing_extensions import TypeVar as DefaultedTypeVar

    LifespanT = DefaultedTypeVar("LifespanT", default=Any)
else:
    LifespanT = TypeVar("LifespanT")
"""What the lifespan yields (``MCPServer[AppState]``); a plain ``MCPServer`` leaves it open."""


class MCPServer(Generic[LifespanT]):
    """An MCP server whose tool calls run as resumable rounds that any replica can resume.

    ``name`` (``"mcp-server"`` unless given), ``instructions`` and ``version`` (``""`` unless
    given) are what clients are told about the server, with ``title``, ``description``,
    ``website_url`` and ``icons`` (a list of :class:`~engine.types.Icon`, dicts, or models of
    that shape) when given: they are its ``serverInfo``. These, ``auth_server_provider`` and
    ``token_verifier`` may be given by position, in the official constructor's order. The other
    options are keywords; all but ``principal``, ``lifespan`` and the objects after them are
    settings, each declared once in :mod:`engine.settings` (its default, bounds and doc), and
    each also read from ``ENGINE_`` and its name in capitals (``ENGINE_STATE_TTL=60``) when not
    given, but for the objects and the official server's ``log_level``, ``debug``,
    ``cache_hints``, ``subscriptions`` and ``dependencies``: docs/settings.md lists them all.

    A second function registered under a tool's or prompt's name, or a resource's URI, is
    dropped and the first kept, with a warning, as the official server does;
    ``warn_on_duplicate_tools`` set to ``False`` (or ``warn_on_duplicate_prompts``,
    ``warn_on_duplicate_resources``) drops it silently. A resource template registered again
    replaces the first, silently, and so does a later tool of ``tools`` (with the warning), as
    there.

    ``tools``: tool records made with ``Tool.from_function(fn, ...)`` (``from engine import
    Tool``), registered as the server is made, before the extensions' tools.

    ``mcp.settings`` reads as the official server's: ``debug``, ``log_level``,
    ``dependencies``, ``lifespan``, ``auth`` and the ``warn_on_duplicate_*`` switches (and this
    server's own settings, grouped). Code may set ``debug`` (read when the HTTP app is made),
    ``log_level`` (read when ``run`` starts uvicorn), the switches (read at each registration),
    ``dependencies`` and ``lifespan`` (read once, when the server is made, so setting it later
    changes nothing, as there); the rest is fixed and setting it raises ``ValueError``.

    Authorization (see docs/auth.md): ``auth``, an :class:`~engine.auth.settings.AuthSettings`
    naming the authorization server and this resource, and ``token_verifier``, which checks
    each request's bearer token (:class:`~engine.auth.jwt_verifier.JWTVerifier`,
    :class:`~engine.auth.introspection.IntrospectionVerifier` or your own
    :class:`~engine.auth.provider.TokenVerifier`). Both or neither. Over HTTP every request to
    the MCP endpoint then needs a valid token, and each call belongs to the token's issuer and
    subject unless ``principal`` says otherwise; stdio stays unauthenticated.

    Tokens (see docs/state.md):

    - ``keys``: the requestState secrets every replica shares (``ENGINE_KEYS``); without any, a
      per-process key is made and a warning logged.
    - ``audience``: what tokens are bound to, ``name`` by default; one per service.
    - ``principal``: ``principal(request) -> str | None`` names who makes a request (it gets a
      :class:`~engine.scope.RequestScope`); a token then opens only for that principal, and
      a 2025-11-25 session and its streams serve only the principal that initialized it.
    - ``state_ttl``: seconds a requestState stays valid (and rounds are kept in the store).
    - ``clock_skew``: seconds another replica's clock may be off from this one's, either way,
      and its requestStates still open here (120; ``ENGINE_CLOCK_SKEW``): a token is taken up
      to that long before it was minted and after it expired, by this clock, and rounds are
      kept twice that long beyond ``state_ttl``.
    - ``max_token_chars``: longer requestStates are refused unopened.
    - ``max_inline_state``: without a store, the largest state carried in a token (bytes).
    - ``request_state_security``: a :class:`~engine.request_state.RequestStateSecurity`, the
      official SDK's spelling of ``keys``, ``state_ttl``, ``audience`` and ``principal`` (or a
      codec of your own) in one object; give it or those, not both.
    - ``trust_unsolicited_answers``: take answers to questions that were not asked in that
      form (off: such answers are ignored and the question asked again).

    Store (see docs/stores.md):

    - ``store``: a URL (``sqlite:///calls.db``, ``redis://...``, ``memory://``) or a
      :class:`~stores.Store` (``ENGINE_STORE``); none by default.
    - ``spill_threshold``: state larger than this (bytes) goes to the store by reference.
    - ``duplicate_wait``: seconds a concurrent duplicate of a round waits for the first one.
    - ``claim_lease``: seconds a round's claim lives unless renewed by the replica running it
      (10): how long the round of a replica that died stays taken.
    - ``journal_arguments``: journal each call's arguments, sealed like the rest of the
      journal (``ENGINE_JOURNAL_ARGUMENTS``; on by default, so a call replays as recorded); an
      argument annotated ``Annotated[str, Redacted()]`` is never journaled.
    - ``journal_ttl``: seconds the journal keeps a call.
    - ``journal_sample``: the share of calls journaled, 0 to 1 (``ENGINE_JOURNAL_SAMPLE``).
    - ``journal_max_event_bytes``: a round's journaled payload over this many bytes (64 KiB by
      default) loses its largest parts, marked as truncated
      (``ENGINE_JOURNAL_MAX_EVENT_BYTES``).
    - ``journal_max_bytes``: the journal's size in the store (256 MiB by default; 0: no cap;
      ``ENGINE_JOURNAL_MAX_BYTES``): past it, its oldest calls are purged first, counted in
      ``engine_journal_calls_purged_total`` (docs/stores.md says what each store counts).

    Tasks, tool calls whose body runs in the background (``@mcp.tool(task=...)``; they need a
    store; see docs/tasks.md):

    - ``task_ttl``: seconds a task is kept from its creation (3600; ``ENGINE_TASK_TTL``).
    - ``task_poll_interval``: seconds between polls clients are asked to keep (0.5).
    - ``task_lease``: seconds a running body's hold on its task lives unless renewed (10;
      ``ENGINE_TASK_LEASE``): how long the task of a replica that died waits before another
      takes it over.
    - ``max_running_tasks``: task bodies one replica runs at once (100); the others wait.
    - ``max_task_takeovers``: times a task may be taken over from a run whose hold lapsed (3;
      ``ENGINE_MAX_TASK_TAKEOVERS``); the next time it fails instead of running its steps again.
    - ``max_tasks_per_principal``: tasks one principal may have kept, made on this replica and
      not past their TTL (1,000); one more is refused (-32031).
    - ``max_tasks_per_replica``: tasks of all principals made on one replica and kept (20,000).
    - ``max_task_creations_per_minute``: tasks one principal may make on a replica in any
      minute (600).
    - ``max_task_result_bytes``: a task's result, as JSON, at most (4 MiB;
      ``ENGINE_MAX_TASK_RESULT_BYTES``); a larger one fails the task and is not kept.
    - ``max_listen_task_ids``: tasks one ``subscriptions/listen`` may name (256); more are
      refused (-32602) before any is looked up.

    Answers (see docs/security.md): ``max_input_responses``, the answers one request may carry
    in ``inputResponses`` (64); more are refused (-32602) before any is read.

    Clients of 2025-11-25 (see docs/legacy.md):

    - ``session_ttl``: seconds an idle session lives.
    - ``legacy_answer_timeout``: seconds a question asked on the back-channel waits.
    - ``max_pending_calls_per_session``: calls of one session that may wait for an answer at
      once (16); a call that would be one more is refused with a JSON-RPC error.
    - ``max_pending_calls``: calls of all sessions that may wait for an answer at once on one
      replica (1,000).
    - ``max_pending_calls_per_principal``: calls of one principal's sessions that may wait for
      an answer at once on one replica (100), so one user cannot hold the replica's slots.
    - ``max_sessions_per_principal``: sessions one principal may have open on one replica
      (100); ``initialize`` beyond is refused (-32031). Deleted sessions, and those unused there
      for ``session_ttl``, do not count.

    Budgets count per principal: the ``principal`` callback's answer, or with auth the token's
    issuer and subject; without either, the client's network address (behind a proxy, give a
    ``principal`` callback so clients are told apart).

    Connections of ``run("streamable-http")`` (see docs/security.md; each also ``ENGINE_`` and
    its name in capitals, ``ENGINE_MAX_HEAD_BYTES`` and so on):

    - ``max_head_bytes``: a longer request line and headers get 431 (64 KiB).
    - ``head_timeout``: seconds for a head to arrive, from the connection or its first byte (10).
    - ``body_timeout``: seconds a body may stall; also the grace before ``min_body_rate`` (30).
    - ``min_body_rate``: bytes per second a body must average after that grace (1024; 0: any).
    - ``max_connections``: open connections at most; beyond, the oldest serving no request is
      closed, or the new one gets 503 (from the file-descriptor limit, at most 10,000).

    Tracing (see docs/deployment.md): ``tracer_provider``, an OpenTelemetry ``TracerProvider``
    this server records its spans with (the ``otel`` extra); without one, the provider
    configured in the process, if any (``ENGINE_TRACING=off`` records nothing).

    Resources (see docs/resources.md): ``resources``, resource objects registered as the server
    is made, as ``add_resource`` would; ``resource_security``, the
    :class:`~engine.resources.security.ResourceSecurity` of every template registered without
    its own (all checks on when not given).

    Extensions (SEP-2133): ``extensions``, objects such as the official SDK's ``Extension``
    subclasses, each contributing tools, resources, request methods, settings advertised in the
    capabilities, and a wrapper around ``tools/call`` (see :mod:`engine.extensions`).

    And: ``lifespan(server)``, an async context manager whose value handlers read as
    ``ctx.request_context.lifespan_context`` (``MCPServer[AppState]`` names its type);
    ``list_ttl_ms``, the caching hint of listings; ``replica_id``, this process's name in the
    ``x-engine-replica`` header and logs (``ENGINE_REPLICA_ID``); ``stamp_results``, also name
    the replica and the call id in each 2026-07-28 result's ``_meta`` (``engine/replica``,
    ``engine/call``; ``ENGINE_STAMP_RESULTS=1``), off by default so results carry what the
    official server's do; ``dependencies``, the packages the server needs,
    kept as given (``mcp.dependencies``) for tools that install servers.

    As the official server takes them: ``cache_hints``, ``{method: CacheHint(ttl_ms, scope)}``
    for the cacheable methods (the others keep ``list_ttl_ms``, private); ``subscriptions``:
    ``False`` serves no ``subscriptions/listen``; ``log_level`` configures Python logging (and
    uvicorn's level under ``run``) unless the program did; ``debug``, Starlette's debug pages
    on the HTTP app's other routes; ``middleware``, functions ``async (ctx, call_next)`` around
    every JSON-RPC message a client sends, the first outermost, also ``mcp.middleware`` (a list
    to append to; see docs/middleware.md). ASGI middleware goes to ``streamable_http_app``.
    """

    def __init__(
        self,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        instructions: str | None = None,
        website_url: str | None = None,
        icons: Iterable[Icon | Mapping[str, Any]] | None = None,
        version: str = "",
        auth_server_provider: Any = None,
        token_verifier: TokenVerifier | None = None,
        *,
        tools: Iterable[Tool] | None = None,
        principal: Principal | None = None,
        lifespan: (
            Callable[[MCPServer[LifespanT]], contextlib.AbstractAsyncContextManager[LifespanT]]
            | None
        ) = None,
        auth: AuthSettings | None = None,
        request_state_security: RequestStateSecurity | None = None,
        resources: Iterable[ResourceObject] | None = None,
        resource_security: ResourceSecurity | None = None,
        extensions: Sequence[Any] | None = None,
        middleware: Iterable[ServerMiddleware[Any]] | None = None,
        **options: Unpack[ServerOptions],
    ) -> None:
        self.middleware: list[ServerMiddleware[Any]] = checked_middleware(middleware)
        """Around every inbound message, the first outermost (docs/middleware.md)."""
        refuse_unknown("MCPServer.__init__", options, SERVER_OPTIONS)
        auth, verifier = _checked_auth(auth, token_verifier, auth_server_provider)
        if request_state_security is not None:
            principal, options = request_state_security.server_options(
                principal, options, authenticated=verifier is not None
            )
        elif principal is None and verifier is not None:
            principal = token_principal
        name = "mcp-server" if name is None else name
        info = InfoSettings.of(title, description, website_url, icons)
        self.settings = Settings.build(
            name=name, info=info, lifespan=lifespan, auth=auth, **options
        )
        """The official server's ``mcp.settings`` (``debug``, ``log_level``, ``dependencies``,
        ``lifespan``, ``auth``, ``warn_on_duplicate_*``) and this server's own settings."""
        auth = self.settings.auth
        self.lifespan = lifespan
        self.dependencies: list[str] = self.settings.dependencies
        self.dependency_overrides = DependencyOverrides()
        self.registry = Registry(self.settings.registry)
        self.resource_security = resource_security or DEFAULT_RESOURCE_SECURITY
        """The policy of a resource template registered without ``security=``."""
        self.custom_routes = Routes()
        self._session_manager: SessionManager | None = None
        self._official_clients: OfficialClientConnections | None = None
        self.title = info.title
        self.description = info.description
        self.website_url = info.website_url
        self.icons: list[Icon] | None = list(info.icons) or None
        self.tools = self.registry.tools
        self.prompts = self.registry.prompts
        self.resources = self.registry.resources
        """Resources at fixed URIs, by URI."""
        self.resource_templates = self.registry.templates
        """Resource templates, by URI template."""
        for tool in tools or ():
            self.registry.put_tool(_tool_record(tool))
        checked = checked_extensions(extensions or ())
        self.core = ServerCore(
            self,
            self.settings,
            self.registry,
            name=name,
            instructions=instructions,
            version=version,
            principal=principal,
            lifespan=lifespan,
            middleware=self.middleware,
            overrides=self.dependency_overrides,
            auth=auth,
            token_verifier=verifier,
            extensions=checked,
        )
        """The server as the protocol layer and the transports receive it (not for users)."""
        self.extensions = self.core.extensions
        self.keys: KeyRing = self.core.keys
        """The requestState keys every replica shares (``keys.labels``: their names)."""
        self.store: Store | None = self.core.store
        """The store, opened from ``store=`` (``None`` without one)."""
        register_contributions(self, checked)
        if "log_level" in options:
            logs.configure_unless_configured(self.settings.log_level)
        logs.set_replica(self.settings.replica_id)
        for resource in resources or ():
            self.add_resource(resource)

    @property
    def name(self) -> str:
        """What clients are told the server is called (``serverInfo.name``)."""
        return self.core.name

    @name.setter
    def name(self, name: str) -> None:
        self.core.describe(name, self.core.version)

    @property
    def version(self) -> str:
        return self.core.version

    @version.setter
    def version(self, version: str) -> None:
        self.core.describe(self.core.name, version)

    @property
    def instructions(self) -> str | None:
        """What clients are told of how to use the server, at ``initialize`` and discovery."""
        return self.core.instructions

    @instructions.setter
    def instructions(self, instructions: str | None) -> None:
        self.core.instructions = instructions

    @property
    def lifespan_context(self) -> Any:
        """What the lifespan yielded while the server runs (``{}`` otherwise)."""
        return self.core.lifespan_context

    # --- registration ---------------------------------------------------------------------------

    def tool(self, name: str | None = None, **options: Unpack[ToolOptions]) -> Callable[[F], F]:
        """Register a function as a tool; its signature is analysed now, not at call time.

        ``name`` is what it is listed and called by (the function's name when not given); the
        other options are :class:`~engine.handlers.tool.ToolOptions`.
        """
        if callable(name):
            raise TypeError(_misused("tool", "()"))
        refuse_unknown("MCPServer.tool", options, ToolOptions.__optional_keys__)
        return _registering(lambda fn: self.add_tool(fn, name, **options))

    def add_tool(
        self, fn: Callable[..., Any], name: str | None = None, **options: Unpack[ToolOptions]
    ) -> Tool:
        """Register a plain function as a tool, exactly as ``@mcp.tool()`` would."""
        return self.registry.add_tool(Tool(fn, name, **options))

    def remove_tool(self, name: str) -> None:
        """Unregister a tool; :class:`~engine.errors.ToolError` when there is none by ``name``."""
        self.registry.remove_tool(name)

    def prompt(
        self, name: str | None = None, **options: Unpack[HandlerOptions]
    ) -> Callable[[F], F]:
        """Register a function as a prompt; ``options`` are
        :class:`~engine.handlers.base.HandlerOptions`."""
        if callable(name):
            raise TypeError(_misused("prompt", "()"))
        refuse_unknown("MCPServer.prompt", options, HandlerOptions.__optional_keys__)
        return _registering(lambda fn: self.add_prompt(fn, name, **options))

    def add_prompt(
        self,
        fn: Callable[..., Any] | Prompt,
        name: str | None = None,
        **options: Unpack[HandlerOptions],
    ) -> Prompt:
        """Register a function as a prompt, as ``@mcp.prompt()`` would, or a prompt made with
        ``Prompt.from_function(fn, ...)``, alone."""
        if isinstance(fn, Prompt):
            if name is not None or options:
                raise TypeError(
                    "add_prompt(prompt) takes a Prompt alone: give its name and options to "
                    "Prompt.from_function"
                )
            return self.registry.add_prompt(fn)
        return self.registry.add_prompt(Prompt(fn, name, **options))

    def remove_prompt(self, name: str) -> None:
        """Unregister a prompt; ``ValueError`` when there is none by ``name``."""
        self.registry.remove_prompt(name)

    def resource(
        self, uri: str, *, name: str | None = None, **options: Unpack[ResourceOptions]
    ) -> Callable[[F], F]:
        """Register a function as the resource at ``uri``: a URI template (RFC 6570) when it
        has ``{...}`` variables, which are then the function's parameters. ``options`` are
        :class:`~engine.handlers.resource.ResourceOptions`. A malformed template raises
        :class:`~engine.resources.uri_template.InvalidUriTemplate` here."""
        if callable(uri):
            raise TypeError(_misused("resource", "('scheme://...')"))
        refuse_unknown("MCPServer.resource", options, ResourceOptions.__optional_keys__)
        UriTemplate.parse(uri)
        return _registering(lambda fn: self.add_resource(fn, uri, name=name, **options))

    def add_resource(
        self,
        fn: Callable[..., Any] | ResourceObject,
        uri: str | None = None,
        *,
        name: str | None = None,
        **options: Unpack[ResourceOptions],
    ) -> Resource:
        """Register a function at ``uri``, as ``@mcp.resource(uri)`` would; or a resource
        object (``TextResource``, ``FileResource``, ``FunctionResource``, a subclass of
        :class:`engine.Resource`...), alone, at its own URI; or a ``ResourceTemplate``, alone,
        behind its template."""
        if not callable(fn):
            if uri is not None or name is not None or options:
                raise TypeError(
                    "add_resource(resource) takes a resource object alone: set its URI, name "
                    "and the rest on the object"
                )
            return self.registry.add_resource(resource_of(fn))
        if uri is None:
            raise TypeError("add_resource(fn, uri): give the URI (or template) fn serves")
        if options.get("security") is None:
            options["security"] = self.resource_security
        return self.registry.add_resource(Resource(fn, uri, name=name, **options))

    def custom_route(
        self,
        path: str,
        methods: Sequence[str] = ("GET",),
        name: str | None = None,
        include_in_schema: bool = True,
        *,
        require_auth: bool = False,
        scopes: Sequence[str] | None = None,
    ) -> Callable[[F], F]:
        """Serve ``path`` (beside ``/mcp``, over HTTP) with the decorated handler.

        The handler is a plain ASGI app, ``async def app(scope, receive, send)``, or, when
        Starlette is installed, ``async def handler(request) -> Response`` as the official
        server takes. ``GET`` also answers ``HEAD``; another method gets ``405``. Paths are exact
        (no ``{param}`` templates), and ``/mcp``, ``/healthz`` and ``/metrics`` are refused.
        ``name`` is kept on the route (``mcp.custom_routes``); ``include_in_schema`` is accepted
        for the official signature and has no effect (there is no OpenAPI schema). Register
        routes before making the app: ``streamable_http_app()`` reads them once.

        A route is open, as on the official server: no bearer token, no Host/Origin check of
        ``/mcp`` (as ``/healthz``), only middleware and CORS. ``require_auth=True`` puts it behind
        the Host/Origin check and the bearer token of ``/mcp`` (the server needs ``auth``), with
        ``scopes`` a token needs on top of ``required_scopes``; the handler reads the token with
        ``get_access_token()``.
        """
        del include_in_schema
        return _registering(
            lambda fn: self.custom_routes.add(
                path, methods, fn, name, require_auth=require_auth, scopes=scopes
            )
        )

    # --- direct calls, from Python rather than from a client (see engine.direct) -------------

    async def list_tools(self) -> list[wire.Tool]:
        """Every tool, as ``tools/list`` lists it."""
        return [wire.Tool.model_validate(listed) for listed in self.registry.list_tools()]

    async def list_prompts(self) -> list[wire.Prompt]:
        return [wire.Prompt.model_validate(listed) for listed in self.registry.list_prompts()]

    async def list_resources(self) -> list[wire.Resource]:
        return [wire.Resource.model_validate(listed) for listed in self.registry.list_resources()]

    async def list_resource_templates(self) -> list[wire.ResourceTemplate]:
        listed = self.registry.list_resource_templates()
        return [wire.ResourceTemplate.model_validate(template) for template in listed]

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        context: Context[Any] | None = None,
    ) -> wire.CallToolResult | direct.HandedBack:
        """Run a tool as a client's ``tools/call`` would, and return its result, or the
        ``InputRequiredResult`` it returned, as it returned it.

        A failure raises :class:`~engine.errors.ToolError`: an unknown tool, arguments that do
        not fit (chained to pydantic's ``ValidationError``), or the tool's own error; a crash
        raises :class:`~engine.errors.UnexpectedToolError`, chained to what the tool raised.
        ``context``: the request to run it in, when a handler forwards its own; none by
        default.
        """
        return await direct.call_tool(self.core.operations, name, arguments, context)

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        context: Context[Any] | None = None,
    ) -> wire.GetPromptResult | direct.HandedBack:
        """Render a prompt as ``prompts/get`` would (or hand back the ``InputRequiredResult``
        it returned); ``ValueError`` for an unknown one."""
        return await direct.get_prompt(self.core.operations, name, arguments, context)

    async def read_resource(
        self, uri: Any, context: Context[Any] | None = None
    ) -> list[ReadResourceContents] | direct.HandedBack:
        """Read a resource as ``resources/read`` would: its contents, text as ``str`` and blobs
        as ``bytes``, or the ``InputRequiredResult`` it returned, as it returned it.
        :class:`~engine.errors.ResourceError` when there is none at ``uri`` or it fails;
        :class:`~engine.errors.UnexpectedResourceError`, chained to what it raised, when it
        crashes."""
        return await direct.read_resource(self.core.operations, str(uri), context)

    # --- completion -----------------------------------------------------------------------------

    def completion(self) -> Callable[[F], F]:
        """Register the function that suggests values for prompt and template arguments.

        It is called as ``completer(ref, argument, context)`` and returns a
        :class:`~engine.types.Completion` (or ``None``: no suggestions). Its parameters receive
        what they are annotated with: models (``PromptReference`` or
        ``ResourceTemplateReference``, ``CompletionArgument``, ``CompletionContext``; this
        package's or the official ``mcp_types`` ones), or, annotated ``dict``, the request's
        dicts, and then it may return a plain list of strings. See :mod:`engine.completions`.
        """

        def decorator(fn: F) -> F:
            self.registry.completer = Completer(fn)
            return fn

        return decorator

    # --- notifications ---------------------------------------------------------------------

    def add_listener(self, listener: Listener) -> None:
        """``listener(method, params)`` is awaited with every notification the server
        publishes (list changes, resource updates), from any replica (docs/context.md)."""
        self.core.add_listener(listener)

    # --- running ------------------------------------------------------------------------------

    def streamable_http_app(self, **options: Unpack[HTTPAppOptions]) -> MCPStarlette:
        """A Starlette application serving this server on ``/mcp``, and its custom routes (see
        ``docs/running.md``); requests to ``/mcp`` skip Starlette's routing.

        ``path`` (or ``streamable_http_path``): the endpoint. ``allowed_hosts`` and
        ``allowed_origins`` (or ``transport_security``, the official settings object): the
        DNS-rebinding checks; ``host``, the address served, adds itself to the hosts when it is
        not a loopback one. ``max_body_bytes`` (or ``max_request_body_size``). ``middleware``:
        ASGI middleware factories, ``lambda app: wrapped_app`` (a middleware class taking the
        app as its one argument is one), or Starlette ``Middleware`` objects; the first is the
        outermost. ``cors_origins``: the browser origins allowed to call this server (``["*"]``
        for any); CORS is off without them. ``json_response``: calls never answered as event
        streams. ``stateless_http``: 2025-11-25 clients get no session. ``session_idle_timeout``:
        seconds an idle 2025-11-25 session lives (``session_ttl``). ``freeze_after_startup``.
        ``mounts``: ``{"/prefix": asgi_app}``, apps served under a path prefix (the journal page).
        """
        from engine.transports.app_options import app_options
        from engine.transports.starlette_app import http_app

        resolved = app_options(options)
        if resolved.session_idle_timeout is not None:
            self.core.sessions.ttl = resolved.session_idle_timeout
        self.session_manager.configure(resolved, options.get("stateless_http", False))
        app = http_app(
            self.core,
            resolved,
            routes=self.custom_routes,
            extra_allowed_hosts=self.settings.serve.extra_allowed_hosts,
        )
        app.debug = self.settings.debug
        return app

    def sse_app(self, **options: Any) -> NoReturn:
        """Refused: the HTTP+SSE transport of protocol 2024-11-05 is not served."""
        raise NotImplementedError(SSE_NOT_SERVED)

    @property
    def session_manager(self) -> SessionManager:
        """What official code enters to run an app it mounted: ``session_manager.run()`` runs
        this server (as :meth:`running` does), and its fields say how sessions are kept."""
        if self._session_manager is None:
            self._session_manager = SessionManager(self.core)
        return self._session_manager

    def run(
        self,
        transport: str = "stdio",
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        drain_timeout: float | None = None,
        uvicorn_options: Mapping[str, Any] | None = None,
        sockets: Sequence[socket.socket] | None = None,
        **options: Any,
    ) -> None:
        """Serve until interrupted: ``"stdio"`` (the default) or ``"streamable-http"``.

        Over HTTP, SIGTERM drains: no new connections, requests in flight finish (within
        ``drain_timeout`` seconds, ``ENGINE_DRAIN_TIMEOUT``, default 25), then exit status 0.
        ``uvicorn_options`` go to uvicorn's ``Config`` (``loop``, ``http``, ``log_level``,
        ``access_log``...; a ``timeout_graceful_shutdown`` there wins over ``drain_timeout``);
        ``options`` to :meth:`streamable_http_app`. Given ``sockets`` already listening (a
        supervisor's, which keeps them across restarts), it serves on those rather than binding
        ``host:port``. uvicorn's access log is off unless asked for
        there or by ``ENGINE_ACCESS_LOG=1``. The process is the server's, so what exists
        once it has started is left out of later garbage collections (``freeze_after_startup``;
        ``ENGINE_GC_FREEZE=0`` turns it off).
        """
        if transport == "stdio":
            from engine.transports.stdio import serve_stdio

            anyio.run(serve_stdio, self.core)
            return
        if transport == "sse":
            raise ValueError(SSE_NOT_SERVED)
        if transport not in ("streamable-http", "http"):
            raise ValueError(f"Unknown transport {transport!r}: use 'stdio' or 'streamable-http'")
        from engine.transports.serving import serve_app

        options.setdefault("freeze_after_startup", self.settings.serve.gc_freeze)
        app, serving = self._http_serving(host, drain_timeout, uvicorn_options, options)
        serve_app(app, host=host, port=port, sockets=sockets, **serving)

    async def run_stdio_async(self) -> None:
        """Serve on stdin and stdout in the caller's event loop until stdin ends."""
        from engine.transports.stdio import serve_stdio

        await serve_stdio(self.core)

    async def run_streamable_http_async(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        drain_timeout: float | None = None,
        uvicorn_options: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> None:
        """:meth:`run` over HTTP, in the caller's event loop: until SIGTERM (drained), Ctrl-C
        or the caller's cancellation. ``options`` go to :meth:`streamable_http_app`; the
        process may be the caller's, so nothing is frozen out of garbage collection unless
        ``freeze_after_startup=True`` asks."""
        from engine.transports.serving import serve_app_async

        app, serving = self._http_serving(host, drain_timeout, uvicorn_options, options)
        await serve_app_async(app, host=host, port=port, **serving)

    async def run_sse_async(self, **options: Any) -> None:
        """The SSE transport is not served: see :meth:`run`."""
        raise ValueError(SSE_NOT_SERVED)

    def _http_serving(
        self,
        host: str,
        drain_timeout: float | None,
        uvicorn_options: Mapping[str, Any] | None,
        options: dict[str, Any],
    ) -> tuple[MCPStarlette, dict[str, Any]]:
        """The app :meth:`run` and :meth:`run_streamable_http_async` serve, and how."""
        from engine.transports.serving import checked_uvicorn_options

        if "workers" in options:
            raise ValueError(
                "run() serves in this process, so it takes no workers: run `python -m engine "
                "serve FILE.py[:ATTR] --workers N`, which starts N processes on one port, each "
                "importing the file, sharing the store"
            )
        serve = self.settings.serve
        given = checked_uvicorn_options(uvicorn_options)
        if "log_level" in self.settings.model_fields_set:  # given, or set since
            given.setdefault("log_level", self.settings.log_level.lower())
        if not options.get("allowed_hosts"):
            options.pop("allowed_hosts", None)
        app = self.streamable_http_app(host=host, **options)
        return app, {
            "drain_timeout": serve.drain_timeout if drain_timeout is None else drain_timeout,
            "access_log": serve.access_log,
            "limits": serve.connections,
            "uvicorn_options": given,
        }

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[MCPServer]:
        """Serve, while the block runs, as a transport does: the lifespan (if any), the store,
        and the relay of the notification bus."""
        async with self.core.running():
            yield self

    # --- the official mcp Client, in process -----------------------------------------------

    async def __aenter__(self) -> tuple[Any, Any]:
        """Connect the official ``mcp`` SDK's ``Client(mcp)`` to this server, in process.

        That client uses a server it does not know as its transport: so a test written with it
        runs here unchanged. Each connection runs the server (its lifespan included) until the
        client leaves (see :mod:`engine.transports.official_client`).
        """
        if self._official_clients is None:
            from engine.transports.official_client import OfficialClientConnections

            self._official_clients = OfficialClientConnections(self.core)
        return await self._official_clients.enter()

    async def __aexit__(self, *exc: Any) -> bool | None:
        assert self._official_clients is not None
        return await self._official_clients.leave(*exc)


def _checked_auth(
    auth: AuthSettings | None, verifier: TokenVerifier | None, provider: Any
) -> tuple[AuthSettings | None, TokenVerifier | None]:
    """``auth`` and ``token_verifier``, given together or not at all."""
    if provider is not None:
        raise ValueError(
            "auth_server_provider: this server is a resource server and runs no authorization "
            "server; run one (Keycloak, Auth0, Entra ID...) and pass token_verifier="
            "JWTVerifier(...) with auth=AuthSettings(issuer_url=...) (see docs/auth.md)"
        )
    if auth is not None:
        auth = AuthSettings.of(auth)  # the official AuthSettings too, by its fields
    if auth is not None and verifier is None:
        raise ValueError(
            "auth needs a token_verifier to check bearer tokens: JWTVerifier(...) for JWTs, "
            "IntrospectionVerifier(...) for opaque tokens (see docs/auth.md)"
        )
    if verifier is not None and auth is None:
        raise ValueError(
            "Cannot specify auth_server_provider or token_verifier without auth settings: "
            "token_verifier needs auth=AuthSettings(issuer_url=..., resource_server_url=...), "
            "from which clients learn where to get a token"
        )
    if verifier is not None and not callable(getattr(verifier, "verify_token", None)):
        raise TypeError(
            f"token_verifier {verifier!r} has no verify_token(token) method; see "
            "engine.auth.provider.TokenVerifier"
        )
    return auth, verifier


def _tool_record(tool: Any) -> Tool:
    """A tool of ``MCPServer(tools=[...])``: a record made with ``Tool.from_function``."""
    if isinstance(tool, Tool):
        return tool
    raise TypeError(
        f"tools takes Tool records, got {tool!r}: make one with Tool.from_function(fn, ...) "
        "(from engine import Tool), or register the function with @mcp.tool() or "
        "mcp.add_tool(fn, ...)"
    )


def _misused(decorator: str, call: str) -> str:
    """The error of ``@mcp.tool`` written without its call (in words ported code looks for)."""
    return (
        f"The @{decorator} decorator was used incorrectly (without its call). "
        f"Use @{decorator}{call} instead of @{decorator}"
    )


def _registering(register: Callable[[Any], object]) -> Callable[[F], F]:
    """A decorator that registers the function it is given, and returns it unchanged."""

    def decorator(fn: F) -> F:
        register(fn)
        return fn

    return decorator


_SERVES_CTX_MCP_SERVER: type[ServerAPI] = MCPServer
"""``ctx.mcp_server`` is typed as :class:`~engine.context.ServerAPI`: the type check fails here
the day the server stops providing it."""

__all__ = ["MCPServer"]
