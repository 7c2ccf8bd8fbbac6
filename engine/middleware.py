"""Middleware around every JSON-RPC message a client sends: ``async (ctx, call_next) -> result``.

A server's ``middleware`` (``MCPServer(middleware=[...])``, or appended to ``mcp.middleware``
later) wraps each inbound request and notification, in both protocol eras and on every
transport, outermost first. A middleware reads the message from ``ctx``; it may pass it on
unchanged (``await call_next(ctx)``), pass on a changed copy
(``await call_next(dataclasses.replace(ctx, params=...))``), answer in the server's place by
returning its own result, or refuse the message by raising :class:`~engine.errors.MCPError`.

The context is made only when the server has middleware: a server without any pays nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol

from pydantic import BaseModel
from typing_extensions import TypeVar

from engine.auth.provider import AccessToken
from engine.questions.session import covers
from engine.scope import NO_SESSION, Session
from engine.types import ClientCapabilities, wire_of

LifespanT = TypeVar("LifespanT", default=Any)
TransportT = TypeVar("TransportT", default=Any)
"""Taken so that annotations written as ``ServerRequestContext[L, R]`` keep working; nothing
here is of that type (HTTP headers are ``ctx.headers``)."""


@dataclass(slots=True, kw_only=True)
class ServerRequestContext(Generic[LifespanT, TransportT]):
    """One inbound message as a middleware sees it.

    ``request_id`` is ``None`` for a notification. ``params`` are the message's own, not yet
    checked; ``meta`` is their ``_meta`` (``None`` when there is none). ``protocol_version`` is
    the era the message is served in: the version a 2026-07-28 request names, or the one its
    2025-11-25 session agreed. ``headers`` are the HTTP request's (lower-case names; ``None`` on
    stdio and in memory), ``access_token`` the bearer token the transport verified.
    ``session`` sends notifications to a 2025-11-25 client's session; a 2026-07-28 request has
    none, and its session sends nothing.
    """

    method: str
    params: Mapping[str, Any] | None = None
    request_id: str | int | None = None
    meta: dict[str, Any] | None = None
    protocol_version: str
    headers: Mapping[str, str] | None = None
    lifespan_context: LifespanT
    session: Session = NO_SESSION
    access_token: AccessToken | None = None


class ClientSession(Session):
    """A message's session, with what its client declared: ``client_capabilities`` (by
    attribute or as a mapping of its wire form) and ``check_client_capability``, as the
    official request context's session reads them. Notifications go to ``session``."""

    def __init__(self, session: Session, capabilities: Mapping[str, Any]) -> None:
        super().__init__()
        self._session = session
        self._capabilities = capabilities

    async def send_notification(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self._session.send_notification(method, params)

    @property
    def client_capabilities(self) -> ClientCapabilities:
        return ClientCapabilities.declared(self._capabilities)

    def check_client_capability(self, capability: Any) -> bool:
        """Whether the client declared ``capability`` (a dict of the capabilities' wire form,
        or a model of it), each of its settings that is given included."""
        return covers(self._capabilities, wire_of(capability))


HandlerResult = BaseModel | dict[str, Any] | None
"""What the rest of the chain returns, and what a middleware may return in its place: a dict of
the result's wire form, a pydantic model of its shape, or ``None`` (an empty result)."""

CallNext = Callable[[ServerRequestContext[Any, Any]], Awaitable[HandlerResult]]
"""The rest of the chain: the next middleware, then the server."""

Link = Callable[[ServerRequestContext[Any, Any], CallNext], Awaitable[Any]]
"""One link of a chain: ``link(ctx, call_next)``."""


def chained(links: Sequence[Link], last: Callable[..., Awaitable[Any]]) -> CallNext:
    """``last`` inside every link, the first outermost. Each link gets what follows it as its
    ``call_next``, and the context it is called with: a link that passes on a changed copy
    changes it for the rest of the chain."""
    call: CallNext = last
    for link in reversed(links):
        call = _bound(link, call)
    return call


def _bound(link: Link, call_next: CallNext) -> CallNext:
    def call(ctx: ServerRequestContext[Any, Any]) -> Awaitable[Any]:
        return link(ctx, call_next)

    return call


class ServerMiddleware(Protocol[LifespanT]):
    """``async (ctx, call_next) -> result``: one link of the chain around each message."""

    def __call__(
        self, ctx: ServerRequestContext[LifespanT, Any], call_next: CallNext, /
    ) -> Awaitable[HandlerResult]: ...


ASGI_ELSEWHERE = (
    "MCPServer(middleware=[...]) takes functions async (ctx, call_next) -> result, around each "
    "JSON-RPC message; got {given!r}. ASGI middleware, around the HTTP app, goes to "
    "mcp.streamable_http_app(middleware=[...]) (see docs/running.md)"
)


def checked_middleware(given: Iterable[Any] | None) -> list[ServerMiddleware[Any]]:
    """The server's chain, as a list to append to; a class or anything not callable (ASGI
    middleware given to the wrong place, most likely) is refused with where it belongs."""
    chain = list(given or ())
    for link in chain:
        if isinstance(link, type) or not callable(link):
            raise TypeError(ASGI_ELSEWHERE.format(given=link))
    return chain


__all__ = [
    "CallNext",
    "ClientSession",
    "HandlerResult",
    "Link",
    "ServerMiddleware",
    "ServerRequestContext",
    "chained",
    "checked_middleware",
]
