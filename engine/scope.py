"""What a round knows of where it runs: its request (``RequestScope``, ``Session``), its call
(``CallScope``) and its server (``ServerHooks``).

The protocol layer makes a ``RequestScope`` per request and the round runner a ``CallScope`` per
round; both travel down to the handler's ``Context``. They sit below it, so that the layers that
make them need not import the Context.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from engine._internal.notify import Notify
from engine.auth.provider import AccessToken
from engine.questions.answers import AnswerSource
from engine.state.call import CallState

if TYPE_CHECKING:
    from engine._internal.tracing import RequestTrace


class ServerHooks(Protocol):
    """What a handler's Context reaches of its server (the server's
    :class:`~engine.server_core.ServerCore` provides it)."""

    @property
    def mcp_server(self) -> Any:
        """The user's server object, which ``ctx.mcp_server`` returns."""
        ...

    @property
    def lifespan_context(self) -> Any: ...

    async def read_resource_contents(self, uri: str, scope: RequestScope) -> list[Any]: ...

    async def notify_list_changed(self, kind: str) -> None: ...

    async def notify_resource_updated(self, uri: str) -> None: ...


class Session:
    """The server side of the conversation with this client.

    ``send_*_list_changed()`` and ``send_resource_updated(uri)`` reach a 2025-11-25 client on its
    session. A 2026-07-28 client only hears list changes on its ``subscriptions/listen`` streams:
    use ``ctx.notify_*`` for those (they reach every subscribed stream, on every replica).
    """

    def __init__(self, notify: Notify | None = None) -> None:
        self._notify = notify

    async def send_notification(self, method: str, params: dict[str, Any] | None = None) -> None:
        if self._notify is not None:
            await self._notify(method, params or {})

    async def send_tool_list_changed(self) -> None:
        await self.send_notification("notifications/tools/list_changed")

    async def send_prompt_list_changed(self) -> None:
        await self.send_notification("notifications/prompts/list_changed")

    async def send_resource_list_changed(self) -> None:
        await self.send_notification("notifications/resources/list_changed")

    async def send_resource_updated(self, uri: Any) -> None:
        await self.send_notification("notifications/resources/updated", {"uri": str(uri)})


NO_SESSION = Session()
"""The session of a request that has none (2026-07-28): it sends nothing, so one is shared."""


@dataclass(slots=True)
class RequestScope:
    """What the protocol layer knows about the request being served."""

    request_id: str | int | None = None
    method: str = ""
    protocol_version: str | None = None
    capabilities: dict[str, Any] = field(default_factory=dict)
    headers: Mapping[str, str] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    notify: Notify | None = None
    session: Session = NO_SESSION
    close_stream: Callable[[], Awaitable[None]] | None = None
    """Ends the HTTP response of a 2025-11-25 call early; the client resumes it with GET."""
    access_token: AccessToken | None = None
    """The bearer token the HTTP transport verified (``None`` on stdio, or with auth off)."""
    trace: RequestTrace | None = None
    """The request's span, when the server traces."""
    client: str | None = None
    """The client's network address, as the HTTP server saw it (``None`` on stdio): whose
    budgets a request draws on when no principal is known."""


class CallScope:
    """Per-round bookkeeping for questions and checkpoints taken inside a handler body."""

    __slots__ = (
        "asker",
        "call_id",
        "input_responses",
        "next_state",
        "prefix",
        "request_state",
        "round_no",
        "state",
        "steps",
        "target",
    )

    def __init__(
        self,
        target: str,
        asker: AnswerSource,
        state: CallState,
        next_state: CallState,
        round_no: int,
        prefix: str = "",
    ) -> None:
        self.target = target
        self.asker = asker
        self.state = state
        self.next_state = next_state
        self.round_no = round_no
        self.prefix = prefix
        self.steps = 0
        self.call_id = ""
        self.input_responses: dict[str, Any] | None = None
        """The client's answers to the input requests the handler returned last round."""
        self.request_state: str | None = None
        """The ``request_state`` string the handler returned last round."""

    def child(self, resolver_key: str) -> CallScope:
        """A scope whose steps are counted apart: a resolver's own questions and checkpoints
        get keys that do not depend on how concurrent resolvers were scheduled."""
        scope = CallScope(
            self.target, self.asker, self.state, self.next_state, self.round_no, f"{resolver_key}."
        )
        scope.call_id = self.call_id
        return scope


class Suspend(BaseException):
    """Raised inside a body when a question must go to the client before it can continue."""
