"""One POST to the MCP endpoint as the protocol entry's channel.

:class:`~engine.protocol.entry.Channel` is what the entry needs of a transport.

What HTTP adds to a message: its headers, token and client address; answers with their
statuses (a refused scope as the bearer gate's 403); a 2026-07-28 request cancelled when its
client hangs up, and streamed only when it asked for notifications; a 2025-11-25 request on a
response stream kept for resumption (:mod:`engine.transports.legacy_http`); a listen's event
stream; cancels of 2025-11-25 requests sent to every replica.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Mapping
from typing import Any, Protocol

from engine.auth.provider import AccessToken
from engine.fleet.sessions import LegacySession
from engine.protocol.dispatch import Response, ScopeRefused
from engine.protocol.entry import Feed, Serve
from engine.protocol.era import Era
from engine.protocol.modern import Exchange, HeaderCheck
from engine.transports import legacy_http
from engine.transports._asgi import (
    Header,
    Receive,
    Scope,
    Send,
    send_json,
    send_plain,
    until_disconnect,
)
from engine.transports._modern_streams import Refuse, stream_call
from engine.transports._served import Hosted

log = logging.getLogger("engine.http")


class Endpoint(Protocol):
    """What a channel reaches of the endpoint it serves
    (:class:`~engine.transports.http.StreamableHTTPApp`)."""

    server: Hosted
    replica_header: Header
    json_response: bool
    """Every 2026-07-28 call answered with one JSON body, never an event stream."""
    stateless: bool
    header_check: HeaderCheck

    def scope_refusal(
        self, token: AccessToken | None, scope: Scope, headers: Mapping[str, str], send: Send
    ) -> Refuse | None: ...

    async def refuse_scopes(
        self,
        token: AccessToken | None,
        scope: Scope,
        headers: Mapping[str, str],
        send: Send,
        refused: ScopeRefused,
    ) -> None: ...

    async def event_stream(self, receive: Receive, send: Send, feed: Feed) -> None: ...


class EndpointChannel(Exchange):
    """The channel of one POST to the endpoint of ``app``, and the exchange its request is
    served with (what the transport knows of it: one object a request, not two)."""

    __slots__ = ("app", "new_session", "receive", "scope", "send")

    headers: Mapping[str, str]
    validate: HeaderCheck
    connection = False
    session: LegacySession | None = None
    """None: a request names its session; none is held between requests."""

    def __init__(
        self,
        app: Endpoint,
        scope: Scope,
        receive: Receive,
        send: Send,
        headers: Mapping[str, str],
        access_token: AccessToken | None,
    ) -> None:
        self.app = app
        self.scope = scope
        self.receive = receive
        self.send = send
        self.headers = headers
        self.notify = None  # an answer sent whole: nothing notifies before it
        self.access_token = access_token
        self.new_session: LegacySession | None = None
        address = scope.get("client")
        self.client = str(address[0]) if address else None
        """The client's address, as the server's socket saw it (whose budgets a request without
        a principal draws on)."""
        self.validate = app.header_check

    @property
    def exchange(self) -> Exchange:
        return self

    @property
    def session_id(self) -> str | None:
        return self.headers.get("mcp-session-id")

    @property
    def stateless(self) -> bool:
        return self.app.stateless

    def principal(self) -> str | None:
        return self.app.server.request_principal(self.headers, self.access_token)

    def respond(self, response: Response) -> Awaitable[None]:
        """Write ``response`` whole: a scope refusal as its 403, nothing to answer as an empty
        body (a ``202``), else its JSON-RPC body."""
        if response.status == 403 and isinstance(response, ScopeRefused):
            return self.app.refuse_scopes(
                self.access_token, self.scope, self.headers, self.send, response
            )
        if response.body is None:
            return send_plain(self.send, response.status, b"", self.app.replica_header)
        return send_json(self.send, response.status, response.body, self.app.replica_header)

    def request(
        self, era: Era, raw: dict[str, Any], notifies: bool, serve: Serve
    ) -> Awaitable[object]:
        app = self.app
        if era is Era.V2025_11_25:
            return legacy_http.answer(
                app.server, raw, serve, self, app.replica_header, self.receive, self.send
            )
        if notifies and not app.json_response:
            refuse = app.scope_refusal(self.access_token, self.scope, self.headers, self.send)
            return stream_call(serve, app.replica_header, self.receive, self.send, refuse)
        return until_disconnect(serve(None), self.receive, then=self.respond)

    async def stream(self, feed: Feed) -> None:
        await self.app.event_stream(self.receive, self.send, feed)

    async def cancel(self, era: Era, request_id: Any) -> None:
        if era is Era.V2025_11_25:  # in the 2026-07-28 era, a hang-up is the cancel
            await self.app.server.bus.publish("cancel", self.session_id, request_id)

    def opened(self, session: LegacySession) -> None:
        self.new_session = session


__all__ = ["Endpoint", "EndpointChannel"]
