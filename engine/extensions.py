"""Extensions (SEP-2133), given as ``MCPServer(extensions=[...])``, applied to a server.

An extension (``engine.Extension``, or any object of its shape: ``engine/extension.py``) has an
``identifier`` (``vendor.prefix/name``) and may contribute tools, resources, request methods of
its own, settings advertised under ``capabilities.extensions[identifier]``, and a wrapper
around every ``tools/call``. The official SDK's ``mcp.server.extension.Extension`` subclasses
are such objects; they are taken by shape, so this package does not depend on that one.

The handlers of an extension's methods and interceptors get a
:class:`~engine.middleware.ServerRequestContext`, as a middleware does, whose ``session`` also
says what the client declared (``session.client_capabilities``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, Unpack

from pydantic import BaseModel, ValidationError

from engine.calls.arguments import summarize
from engine.calls.reply import CallRequest, ReplyKind, RoundReply
from engine.errors import INVALID_PARAMS, METHOD_NOT_FOUND, MISSING_CLIENT_CAPABILITY, MCPError
from engine.extension import ExtensionLike, check_identifier
from engine.handlers.resource import Resource, ResourceObject, ResourceOptions
from engine.handlers.tool import Tool, ToolOptions
from engine.middleware import CallNext, ClientSession, ServerRequestContext, chained
from engine.operations import Operations
from engine.protocol.served import ExtensionMethod
from engine.questions.answers import AnswerSource
from engine.scope import RequestScope
from engine.types import CallToolResult, TextContent, wire_of


class Registrar(Protocol):
    """Where an extension's tools and resources are registered: the server's public surface
    (an ``MCPServer``), exactly as a user would register them."""

    def add_tool(
        self, fn: Callable[..., Any], name: str | None = None, **options: Unpack[ToolOptions]
    ) -> Tool: ...

    def add_resource(
        self,
        fn: Callable[..., Any] | ResourceObject,
        uri: str | None = None,
        *,
        name: str | None = None,
        **options: Unpack[ResourceOptions],
    ) -> Resource: ...


class Host(Protocol):
    """What an extension's methods and interceptors read of the server as they serve a request
    (a :class:`~engine.server_core.ServerCore`)."""

    @property
    def lifespan_context(self) -> Any: ...


@dataclasses.dataclass(slots=True)
class ToolCallParams:
    """The ``tools/call`` an interceptor is given."""

    name: str
    arguments: dict[str, Any] | None = None


def require_client_extension(context: Any, identifier: str) -> None:
    """Refuse the request (``-32021``, naming the extension in ``requiredCapabilities``) unless
    its client declared the extension ``identifier``.

    ``context``: a handler's ``Context``, its ``ctx.request_context``, or the context an
    extension's handler is given.
    """
    if identifier not in _declared_extensions(context):
        raise MCPError(
            MISSING_CLIENT_CAPABILITY,
            f"This needs the client extension {identifier!r}, which the client did not declare "
            "in its capabilities",
            {"requiredCapabilities": {"extensions": {identifier: {}}}},
        )


def checked_extensions(extensions: Sequence[ExtensionLike]) -> list[ExtensionLike]:
    """The extensions, each with a well-formed identifier that no other one has."""
    checked: list[ExtensionLike] = []
    for extension in extensions:
        identifier = check_identifier(
            getattr(extension, "identifier", None), type(extension).__name__
        )
        if any(known.identifier == identifier for known in checked):
            raise ValueError(f"Two extensions have the identifier {identifier!r}; give one")
        checked.append(extension)
    return checked


def register_contributions(server: Registrar, extensions: Sequence[ExtensionLike]) -> None:
    """Register each extension's tools and resources on ``server``."""
    for extension in extensions:
        for tool in extension.tools():
            server.add_tool(tool.fn, meta=tool.meta, **tool.kwargs)
        for binding in extension.resources():
            server.add_resource(binding.resource)


def bound_methods(host: Host, extensions: Sequence[ExtensionLike]) -> dict[str, ExtensionMethod]:
    """The request methods the extensions add, by name, as the protocol layer serves them."""
    methods: dict[str, ExtensionMethod] = {}
    for extension in extensions:
        for method in extension.methods():
            if method.method in methods:
                raise ValueError(  # the official wording, which ported tests pin
                    f"Extension {extension.identifier!r} binds method {method.method!r}, which is "
                    "already registered; extension methods are additive and cannot replace "
                    "another handler"
                )
            methods[method.method] = _method(host, method)
    return methods


def advertised(extensions: Sequence[ExtensionLike]) -> dict[str, Any]:
    """``capabilities.extensions``: each extension's settings, by identifier."""
    return {extension.identifier: dict(extension.settings()) for extension in extensions}


def interceptors(extensions: Sequence[ExtensionLike]) -> list[ExtensionLike]:
    """The extensions whose class overrides ``intercept_tool_call`` (the base one passes the
    call through, so only an override is worth wrapping ``tools/call`` in)."""
    return [e for e in extensions if _overrides(type(e), "intercept_tool_call")]


class InterceptedOperations(Operations):
    """The round operations, with every ``tools/call`` passed through the extensions'
    interceptors, the first given outermost."""

    def __init__(self, server: Host, operations: Operations, wrapping: list[ExtensionLike]):
        super().__init__(operations.registry, operations.runner, operations.metrics)
        self.tasks = operations.tasks
        self.server = server
        self.wrapping = wrapping

    def call_tool(
        self, request: CallRequest, in_place: AnswerSource | None = None
    ) -> Awaitable[RoundReply]:
        return self._intercepted(request, in_place)

    async def _intercepted(self, request: CallRequest, in_place: AnswerSource | None) -> RoundReply:
        params = ToolCallParams(request.target, request.arguments)
        replies: list[RoundReply] = []
        results: list[Any] = []
        run = super().call_tool

        async def innermost(context: ServerRequestContext[Any, Any]) -> Any:
            reply = await run(request, in_place)
            replies.append(reply)
            result = _result_of(reply)
            results.append(result)
            return result

        links = [_interceptor(extension, params) for extension in self.wrapping]
        outcome = await chained(links, innermost)(_context(self.server, request.scope))
        if isinstance(outcome, RoundReply):
            return outcome
        if results and outcome is results[-1]:
            return replies[-1]
        reply = replies[-1] if replies else RoundReply(ReplyKind.COMPLETE)
        reply.kind, reply.value, reply.error = ReplyKind.COMPLETE, wire_of(outcome), None
        return reply


def _interceptor(
    extension: ExtensionLike, params: ToolCallParams
) -> Callable[[ServerRequestContext[Any, Any], CallNext], Awaitable[Any]]:
    """The extension's interceptor as a link of a chain, the call's params bound."""

    def link(context: ServerRequestContext[Any, Any], call_next: CallNext) -> Awaitable[Any]:
        return extension.intercept_tool_call(params, context, call_next)

    return link


def _result_of(reply: RoundReply) -> Any:
    """What an interceptor sees of a round: its ``CallToolResult``, or the reply itself (a
    question, a task, a response already sent) to hand back untouched."""
    if reply.kind is ReplyKind.COMPLETE:
        return CallToolResult.model_validate(reply.value)
    if reply.kind is ReplyKind.ERROR:
        return CallToolResult(content=[TextContent(text=reply.error or "")], is_error=True)
    return reply


def _method(server: Host, binding: Any) -> ExtensionMethod:
    """An extension's request method, as the protocol layer serves it."""
    name: str = binding.method
    params_type: type[BaseModel] = binding.params_type
    handler = binding.handler
    versions = binding.protocol_versions

    async def serve(params: dict[str, Any], scope: RequestScope) -> dict[str, Any]:
        if versions is not None and scope.protocol_version not in versions:
            raise MCPError(METHOD_NOT_FOUND, "Method not found", name)
        try:
            parsed = params_type.model_validate(params)
        except ValidationError as exc:
            raise MCPError(INVALID_PARAMS, f"Invalid params for {name}: {summarize(exc)}") from None
        result = await handler(_context(server, scope, params), parsed)
        answer = wire_of(result)
        if not isinstance(answer, dict):
            raise TypeError(f"The handler of {name} returned {type(result).__name__}, not a result")
        return answer

    return serve


def _context(
    server: Host, scope: RequestScope, params: Mapping[str, Any] | None = None
) -> ServerRequestContext[Any, Any]:
    return ServerRequestContext(
        method=scope.method,
        params=params,
        request_id=scope.request_id,
        meta=scope.meta,
        protocol_version=scope.protocol_version or "",
        headers=scope.headers,
        lifespan_context=server.lifespan_context,
        session=ClientSession(scope.session, scope.capabilities),
        access_token=scope.access_token,
    )


def _declared_extensions(context: Any) -> Mapping[str, Any]:
    capabilities = getattr(context, "client_capabilities", None)
    if capabilities is None:
        capabilities = getattr(getattr(context, "session", None), "client_capabilities", None)
    if isinstance(capabilities, Mapping):
        declared = capabilities.get("extensions")
    else:
        declared = getattr(capabilities, "extensions", None)
    return declared if isinstance(declared, Mapping) else {}


def _overrides(cls: type, name: str) -> bool:
    """Whether more than one class of ``cls``'s hierarchy defines ``name``."""
    return sum(name in klass.__dict__ for klass in cls.__mro__) > 1


__all__ = [
    "Host",
    "InterceptedOperations",
    "Registrar",
    "ToolCallParams",
    "advertised",
    "bound_methods",
    "checked_extensions",
    "interceptors",
    "register_contributions",
    "require_client_extension",
]
