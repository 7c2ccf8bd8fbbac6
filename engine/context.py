"""The ``Context`` a handler asks for by annotation: the request, the server, the way back.

A new ``Context`` is made for every request. It is never ambient: a helper that needs it gets it
passed as an argument.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, cast

import anyio.to_thread
from pydantic import BaseModel, TypeAdapter
from typing_extensions import TypeVar

from engine._internal.logbridge import log_message, notify_in_order
from engine.auth.provider import AccessToken
from engine.questions.answers import PENDING
from engine.questions.kinds import Elicit, ElicitURL, ListRoots, Question, Sample
from engine.questions.rendering import Rendered
from engine.questions.session import RequestSession
from engine.scope import NO_SESSION, CallScope, RequestScope, ServerHooks, Session, Suspend
from engine.state.call import HandlerRequests
from engine.types import (
    CallToolResult,
    ClientCapabilities,
    CreateMessageResult,
    GetPromptResult,
    Icon,
    ListRootsResult,
    ModelPreferences,
    Prompt,
    Resource,
    ResourceTemplate,
    SamplingMessage,
    TextContent,
    Tool,
    ToolChoice,
    wire_of,
)

log = logging.getLogger("engine.rounds")

LOG_LEVEL_META = "io.modelcontextprotocol/logLevel"

LifespanT = TypeVar("LifespanT")
RequestT = TypeVar("RequestT", default=Any)
"""The official SDK's second parameter (its transport's request type): accepted, so that
``Context[AppState, Any]`` annotations work; ``Context[AppState]`` means the same."""
ModelT = TypeVar("ModelT", bound=BaseModel)
R = TypeVar("R")


class ServerAPI(Protocol):
    """What ``ctx.mcp_server`` is typed as: the public API of the server a handler runs in.

    The object is the ``MCPServer`` itself. A protocol, because the Context sits below the server
    and must not import it: what a handler reaches of its server (who it is, its listings, its
    direct calls) is named here, and the server is checked against it where it is defined.
    """

    @property
    def core(self) -> ServerHooks:
        """What the layers below the server reach of it (``Context(mcp_server=mcp)`` too)."""
        ...

    @property
    def lifespan_context(self) -> Any: ...

    @property
    def name(self) -> str: ...

    @property
    def instructions(self) -> str | None: ...

    @property
    def version(self) -> str | None: ...

    @property
    def title(self) -> str | None: ...

    @property
    def description(self) -> str | None: ...

    @property
    def website_url(self) -> str | None: ...

    @property
    def icons(self) -> list[Icon] | None: ...

    async def list_tools(self) -> list[Tool]: ...

    async def list_prompts(self) -> list[Prompt]: ...

    async def list_resources(self) -> list[Resource]: ...

    async def list_resource_templates(self) -> list[ResourceTemplate]: ...

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        context: Context[Any] | None = None,
    ) -> CallToolResult | Any: ...

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        context: Context[Any] | None = None,
    ) -> GetPromptResult | Any: ...

    async def read_resource(self, uri: Any, context: Context[Any] | None = None) -> Any: ...


_OUTSIDE = (
    "Context is not available outside of a request: this one belongs to no server; make it with "
    "Context(mcp_server=server)"
)
_NO_REQUEST = (
    "Context is not available outside of a request: this one was made without a request; pass "
    "Context(request_context=...) a record of one (request_id, method, session, "
    "lifespan_context...)"
)


class _Detached:
    """The server of a Context made by hand without one: what needs a server says so."""

    @property
    def mcp_server(self) -> Any:
        raise ValueError(_OUTSIDE)

    @property
    def lifespan_context(self) -> Any:
        return {}

    async def read_resource_contents(self, uri: str, scope: RequestScope) -> list[Any]:
        raise ValueError(_OUTSIDE)

    async def notify_list_changed(self, kind: str) -> None:
        raise ValueError(_OUTSIDE)

    async def notify_resource_updated(self, uri: str) -> None:
        raise ValueError(_OUTSIDE)


DETACHED: ServerHooks = _Detached()


def _scope_of(record: Any) -> RequestScope:
    """The scope of a request record given by hand (ours, or the official one by shape: its
    headers are those of its ``request``, its capabilities its session's)."""
    meta = getattr(record, "meta", None)
    if meta is not None and not isinstance(meta, dict):
        dump = getattr(meta, "model_dump", None)
        meta = dump(by_alias=True, exclude_none=True) if callable(dump) else None
    headers = getattr(record, "headers", None)
    if headers is None:
        headers = getattr(getattr(record, "request", None), "headers", None)
    session = getattr(record, "session", None)
    capabilities = wire_of(getattr(session, "client_capabilities", None))
    return RequestScope(
        request_id=getattr(record, "request_id", None),
        method=getattr(record, "method", None) or "",
        protocol_version=getattr(record, "protocol_version", None),
        capabilities=capabilities if isinstance(capabilities, dict) else {},
        headers=headers,
        meta=meta or {},
        session=session if isinstance(session, Session) else NO_SESSION,
    )


def _foreign_session(record: Any) -> Any:
    """The session of a record given by hand when it is not one of ours (a test's mock, or the
    official SDK's session): what a Context made from it reports progress and logs through."""
    session = getattr(record, "session", None)
    if session is None or isinstance(session, Session | RequestSession):
        return None
    return session


@dataclass(slots=True)
class RequestContext(Generic[LifespanT]):
    """The raw per-request record; ``lifespan_context`` is what the lifespan yielded."""

    request_id: str | int | None
    method: str
    protocol_version: str | None
    headers: Mapping[str, str] | None
    meta: dict[str, Any]
    lifespan_context: LifespanT
    session: RequestSession
    client_capabilities: ClientCapabilities = field(default_factory=ClientCapabilities)
    """What the client declared it supports (by attribute, or as a mapping of its wire form)."""


class Context(Generic[LifespanT, RequestT]):
    """Injected into any tool, resource, prompt or resolver that annotates a parameter with it.

    The engine makes one per request. Made by hand, as the official SDK's tests do,
    ``Context(mcp_server=server)`` belongs to that server and no request, and
    ``Context(request_context=record)`` takes the request's id, method, protocol version,
    headers and ``_meta`` from a record of that shape, and reports progress and logs through
    its session; ``Context()`` belongs to nothing. What needs a server or a request raises
    ``ValueError`` where there is none.
    """

    _declared: ClientCapabilities | None = None  # these two, like the record, made on first use
    _session: RequestSession | None = None

    def __init__(
        self,
        server: ServerHooks | None = None,
        scope: RequestScope | None = None,
        call: CallScope | None = None,
        *,
        mcp_server: ServerAPI | None = None,
        request_context: Any = None,
    ) -> None:
        if server is None:
            server = mcp_server.core if mcp_server is not None else DETACHED
        self._record: Any = None
        self._foreign: Any = None
        self._requestless = False
        if scope is None:
            if request_context is None:
                scope, self._requestless = RequestScope(), True
            else:
                scope = _scope_of(request_context)
                self._record, self._foreign = request_context, _foreign_session(request_context)
        self._server = server
        self._scope = scope
        self._call = call

    def for_resolver(self, key: str) -> Context[LifespanT, RequestT]:
        """The Context a resolver receives: the same request, its own question keys."""
        if self._call is None:
            return self
        return Context(self._server, self._scope, self._call.child(key))

    @property
    def mcp_server(self) -> ServerAPI:
        return cast(ServerAPI, self._server.mcp_server)

    @property
    def request_id(self) -> str:
        """The JSON-RPC id of the request being served, as a string."""
        return "" if self._scope.request_id is None else str(self._scope.request_id)

    @property
    def headers(self) -> Mapping[str, str] | None:
        """The HTTP request headers (lower-case names), or ``None`` on stdio."""
        return self._scope.headers

    @property
    def protocol_version(self) -> str | None:
        return self._scope.protocol_version

    @property
    def access_token(self) -> AccessToken | None:
        """The caller's verified access token (``None`` on stdio, or with auth off): its
        ``subject``, ``scopes`` and ``claims``, and the ``token`` itself, to call a downstream
        API on the caller's behalf. Outside a handler, ``engine.auth.current.get_access_token()``
        returns the same token."""
        return self._scope.access_token

    @property
    def client_capabilities(self) -> ClientCapabilities:
        """What the client declared: read it by attribute (``.sampling``, ``.extensions``) or
        as a mapping of its wire form (``["sampling"]``, ``.get("extensions")``)."""
        if self._declared is None:
            self._declared = ClientCapabilities.declared(self._scope.capabilities)
        return self._declared

    @property
    def session(self) -> RequestSession:
        """The session API of this request: notifications to a 2025-11-25 session, questions
        asked as :meth:`ask` asks them (engine/questions/session.py). A Context made by hand
        from a record of a request gives that record's own session."""
        if self._foreign is not None:
            return cast(RequestSession, self._foreign)
        if self._session is None:
            scope = self._scope
            self._session = RequestSession(self, scope.session, scope.capabilities, scope.notify)
        return self._session

    @property
    def request_context(self) -> RequestContext[LifespanT]:
        """The record of the request: what a Context made by hand was given, else one made
        here on first use; ``ValueError`` for a Context made by hand without one."""
        if self._record is not None:
            return cast(RequestContext[LifespanT], self._record)
        if self._requestless:
            raise ValueError(_NO_REQUEST)
        scope = self._scope
        record: RequestContext[LifespanT] = RequestContext(
            request_id=scope.request_id,
            method=scope.method,
            protocol_version=scope.protocol_version,
            headers=scope.headers,
            meta=scope.meta,
            lifespan_context=self._server.lifespan_context,
            session=self.session,
            client_capabilities=self.client_capabilities,
        )
        self._record = record
        return record

    @property
    def call_id(self) -> str | None:
        """The id shared by every round of this call (``None`` outside a multi-round handler)."""
        return self._call.call_id if self._call is not None else None

    @property
    def round(self) -> int:
        """1 on the first round of a call, then 2, 3, ..."""
        return self._call.round_no if self._call is not None else 1

    @property
    def input_responses(self) -> dict[str, Any] | None:
        """The client's answers to the input requests this handler returned last round (an
        ``InputRequiredResult``), by the keys it gave them; ``None`` on a call's first round,
        and when the client sent no answers. Only answers to requests it made are here, each as
        the model of what it asked: ``ElicitResult``, ``CreateMessageResult`` or
        ``ListRootsResult`` (another library's, when the return annotation names that
        library's ``InputRequiredResult``)."""
        return self._call.input_responses if self._call is not None else None

    @property
    def request_state(self) -> str | None:
        """The ``request_state`` string this handler put in the ``InputRequiredResult`` it
        returned last round, given back as it was (the server sealed it into its own
        ``requestState``, so a client can neither read nor change it); ``None`` otherwise."""
        return self._call.request_state if self._call is not None else None

    async def read_resource(self, uri: str) -> list[Any]:
        """Read one of this server's resources through the same registry as ``resources/read``."""
        return await self._server.read_resource_contents(uri, self._scope)

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Send ``notifications/progress`` if the caller asked for progress; else do nothing."""
        if self._foreign is not None:
            await self._foreign.report_progress(progress, total, message)
            return
        token = self._scope.meta.get("progressToken")
        if token is None or self._scope.notify is None:
            return
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await notify_in_order(self._scope.notify, "notifications/progress", params)

    async def log(self, level: str, data: Any, *, logger_name: str | None = None) -> None:
        """Send ``notifications/message`` ``{level, logger?, data}`` to this request's client.

        Only when the client asked for ``level`` or a lower one (2026-07-28: the request's
        ``_meta["io.modelcontextprotocol/logLevel"]``; 2025-11-25: the session's
        ``logging/setLevel``, ``info`` by default) and the request can carry notifications; a
        message below that level, or to a client that did not ask, is dropped silently. ``level``
        is one of ``debug``, ``info``, ``notice``, ``warning``, ``error``, ``critical``,
        ``alert``, ``emergency`` (another raises ``ValueError``); ``data`` any JSON value.
        """
        if self._foreign is not None:
            await self._foreign.send_log_message(
                level=level, data=data, logger=logger_name, related_request_id=self.request_id
            )
            return
        scope = self._scope
        requested = scope.meta.get(LOG_LEVEL_META)
        await log_message(
            level,
            data,
            logger_name,
            requested=requested if type(requested) is str else None,
            notify=scope.notify,
        )

    async def debug(self, data: Any, *, logger_name: str | None = None) -> None:
        await self.log("debug", data, logger_name=logger_name)

    async def info(self, data: Any, *, logger_name: str | None = None) -> None:
        await self.log("info", data, logger_name=logger_name)

    async def warning(self, data: Any, *, logger_name: str | None = None) -> None:
        await self.log("warning", data, logger_name=logger_name)

    async def error(self, data: Any, *, logger_name: str | None = None) -> None:
        await self.log("error", data, logger_name=logger_name)

    async def close_sse_stream(self) -> None:
        """Close this request's event stream now (2025-11-25 over HTTP); the call goes on, and
        the client picks up the rest with ``GET`` + ``Last-Event-ID``. Elsewhere a no-op."""
        if self._scope.close_stream is not None:
            await self._scope.close_stream()

    async def notify_tools_changed(self) -> None:
        await self._server.notify_list_changed("tools")

    async def notify_prompts_changed(self) -> None:
        await self._server.notify_list_changed("prompts")

    async def notify_resources_changed(self) -> None:
        await self._server.notify_list_changed("resources")

    async def notify_resource_updated(self, uri: str) -> None:
        await self._server.notify_resource_updated(uri)

    # --- questions and checkpoints inside a body ---------------------------------------------

    def _require_call(self, what: str) -> CallScope:
        if self._call is None:
            raise RuntimeError(
                f"ctx.{what}() needs a tool call, prompt or resource read in progress; it is not "
                "available in this request"
            )
        return self._call

    def _asking_call(self, what: str) -> CallScope:
        """The call, for a question from the body: refused in a call whose handler asks the
        client itself (its answers would not be carried to the rounds after)."""
        call = self._require_call(what)
        if call.state.handler is not None:
            raise RuntimeError(
                f"ctx.{what}() in a call whose handler returned its own input requests: a call "
                "asks the client through one channel; ask with another InputRequiredResult, or "
                "only through ctx"
            )
        return call

    async def ask(self, question: Question, *, key: str | None = None) -> Any:
        """Ask any question from a body; returns its outcome.

        On 2026-07-28 the body is replayed every round: the n-th question is answered from the
        record, or the round ends with ``input_required``. So build questions only from the
        arguments and earlier answers. If a replay asks a different n-th question than the
        recorded one, the recorded answer is discarded and the question asked again.
        """
        call = self._asking_call("ask")
        call.steps += 1
        wire_key = key or f"{call.prefix}{question.kind}#{call.steps}"
        rendered = Rendered.of(question, from_body=True)
        answer = call.asker.answer
        if answer is None:
            outcome = await call.asker.ask(wire_key, rendered, f"{call.target!r}")
        else:  # the answer is in the request: no coroutine to ask it
            outcome = answer(wire_key, rendered, f"{call.target!r}")
        if outcome is PENDING:
            raise Suspend
        return outcome

    async def ask_all(self, *questions: Question) -> list[Any]:
        """Ask several questions together; their outcomes, in order.

        Every one not answered yet goes to the client at once (one ``input_required`` with all
        of them, on 2026-07-28 and in a task), so they are answered together rather than a
        round each. Each takes its place in the body's questions, as :meth:`ask` would.
        """
        call = self._asking_call("ask_all")
        outcomes: list[Any] = []
        for question in questions:
            call.steps += 1
            wire_key = f"{call.prefix}{question.kind}#{call.steps}"
            rendered = Rendered.of(question, from_body=True)
            outcomes.append(await call.asker.ask(wire_key, rendered, f"{call.target!r}"))
        if any(outcome is PENDING for outcome in outcomes):
            raise Suspend
        return outcomes

    async def elicit(self, message: str, schema: type[ModelT]) -> Any:
        """Ask the user to fill a form; returns an ``ElicitationResult[schema]``."""
        return await self.ask(Elicit(message, schema))

    async def elicit_url(self, message: str, url: str, elicitation_id: str | None = None) -> Any:
        """Send the user to a URL; returns the accept/decline/cancel outcome.

        ``elicitation_id`` is what the client is told the elicitation is called (a random one
        when not given): the ``ctx.session.send_elicit_complete(elicitation_id)`` that tells the
        client the work behind the URL is done names it."""
        return await self.ask(ElicitURL(message, url, elicitation_id))

    async def sample(
        self,
        messages: Sequence[SamplingMessage] | str,
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        temperature: float | None = None,
        stop_sequences: list[str] | None = None,
        model_preferences: ModelPreferences | None = None,
        tools: list[Tool] | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> CreateMessageResult:
        """Ask the client's model; a plain string becomes one user message."""
        if isinstance(messages, str):
            messages = [SamplingMessage(role="user", content=TextContent(text=messages))]
        result: CreateMessageResult = await self.ask(
            Sample(
                messages,
                max_tokens=max_tokens,
                system_prompt=system_prompt,
                temperature=temperature,
                stop_sequences=stop_sequences,
                model_preferences=model_preferences,
                tools=tools,
                tool_choice=tool_choice,
            )
        )
        return result

    async def list_roots(self) -> ListRootsResult:
        result: ListRootsResult = await self.ask(ListRoots())
        return result

    async def once(
        self, fn: Callable[..., Awaitable[R]] | Callable[..., R], *args: Any, **kwargs: Any
    ) -> R:
        """Run a side effect once per call, whatever the number of rounds and replicas.

        The n-th ``once`` of a body records its value in the call's state; on later rounds (on any
        replica) the recorded value is returned and ``fn`` does not run. The value must be
        JSON-compatible or described by ``fn``'s return annotation (a pydantic model, say).
        """
        call = self._require_call("once")
        call.steps += 1
        key = f"{call.prefix}once#{call.steps}"
        adapter = _return_adapter(fn)
        if key in call.state.checkpoints:
            recorded = call.state.checkpoints[key]
            return adapter.validate_python(recorded) if adapter is not None else recorded  # type: ignore[no-any-return]
        fence = call.asker.before_once
        if fence is not None:
            await fence(key)
        if inspect.iscoroutinefunction(fn):
            value = await fn(*args, **kwargs)
        else:
            value = await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))
        dumped = adapter.dump_python(value, mode="json") if adapter is not None else value
        call.next_state.checkpoints[key] = dumped
        kept = call.asker.on_checkpoint
        if kept is not None:
            await kept(key)
        return value  # type: ignore[no-any-return]


def request_scope(context: Context[Any]) -> RequestScope:
    """The request a ``Context`` belongs to (for a handler that forwards it to a direct call)."""
    return context._scope


def server_hooks(context: Context[Any]) -> ServerHooks | None:
    """What ``context`` reaches of its server; ``None`` for a Context that belongs to none."""
    return None if context._server is DETACHED else context._server


def forwarded_input(context: Context[Any]) -> tuple[HandlerRequests, dict[str, Any] | None] | None:
    """The input requests the handler of ``context`` returned last round and the client's
    answers to them (wire form), for a direct call it makes with its Context: when it returned
    what that call handed back, the answers are that call's. ``None`` when it asked nothing."""
    call = context._call
    if call is None or call.state.handler is None:
        return None
    answers = call.input_responses
    wire = None if answers is None else {key: wire_of(a) for key, a in answers.items()}
    return call.state.handler, wire


@functools.lru_cache(maxsize=256)
def _return_adapter(fn: Callable[..., Any]) -> TypeAdapter[Any] | None:
    from engine._internal.introspect import type_hints

    returns = type_hints(fn).get("return")
    if returns is None:
        return None
    return TypeAdapter(returns)
