"""What the protocol layer reaches of a server: the operations behind each method, and the
services both eras use (a server's :class:`~engine.server_core.ServerCore` provides it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from engine._internal.metrics import Metrics
from engine._internal.tracing import Tracing
from engine.calls.reply import CallRequest, RoundReply
from engine.fleet.backchannel import BackChannel
from engine.fleet.notifications import Listener
from engine.fleet.sessions import SessionRegistry
from engine.middleware import ServerMiddleware
from engine.questions.answers import AnswerSource
from engine.scope import RequestScope
from engine.tasks.service import Tasks

ExtensionMethod = Callable[[dict[str, Any], RequestScope], Awaitable[dict[str, Any]]]
"""A request method an extension serves: its params and request in, its result out."""


class Rounds(Protocol):
    """The round operations behind ``tools/call``, ``prompts/get`` and ``resources/read``
    (:class:`engine.operations.Operations`)."""

    def call_tool(
        self, request: CallRequest, in_place: AnswerSource | None = None
    ) -> Awaitable[RoundReply]: ...

    async def get_prompt(
        self, request: CallRequest, in_place: AnswerSource | None = None
    ) -> RoundReply: ...

    async def read_resource(
        self, request: CallRequest, in_place: AnswerSource | None = None
    ) -> RoundReply: ...


class Listings(Protocol):
    """Every registered tool, prompt, resource and template in its wire form
    (:class:`engine.registry.Registry`)."""

    def list_tools(self) -> list[dict[str, Any]]: ...

    def list_prompts(self) -> list[dict[str, Any]]: ...

    def list_resources(self) -> list[dict[str, Any]]: ...

    def list_resource_templates(self) -> list[dict[str, Any]]: ...


class Served(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def instructions(self) -> str | None: ...

    @property
    def server_info(self) -> dict[str, Any]:
        """The wire ``serverInfo``: ``name``, ``version`` and the optional ``title``,
        ``description``, ``websiteUrl`` and ``icons``."""
        ...

    @property
    def replica_id(self) -> str: ...

    @property
    def stamp_results(self) -> bool:
        """Whether a result names the replica and the call in its ``_meta``."""
        ...

    @property
    def serves_subscriptions(self) -> bool:
        """Whether ``subscriptions/listen`` is served (and its flags advertised)."""
        ...

    @property
    def result_hints(self) -> Mapping[str, tuple[int, str]]:
        """``(ttlMs, cacheScope)`` of each cacheable method's results."""
        ...

    @property
    def metrics(self) -> Metrics: ...

    @property
    def middleware(self) -> Sequence[ServerMiddleware[Any]]:
        """Around every inbound message, the first outermost; empty: none, and no cost."""
        ...

    @property
    def lifespan_context(self) -> Any:
        """What the lifespan yielded, for the context a middleware receives."""
        ...

    @property
    def tracing(self) -> Tracing:
        """Whether and how requests are traced."""
        ...

    @property
    def sessions(self) -> SessionRegistry: ...

    @property
    def backchannel(self) -> BackChannel: ...

    @property
    def legacy_answer_timeout(self) -> float: ...

    @property
    def tasks(self) -> Tasks | None:
        """The server's tasks; ``None`` when it has no store."""
        ...

    def capabilities(self) -> dict[str, Any]: ...

    def principal_of(self, scope: RequestScope) -> str | None:
        """Who makes the request, by the ``principal`` callback (``None``: nobody in
        particular, or no callback); a failing callback raises."""
        ...

    @property
    def operations(self) -> Rounds: ...

    @property
    def registry(self) -> Listings: ...

    @property
    def extension_methods(self) -> Mapping[str, ExtensionMethod]:
        """The request methods the server's extensions add, by name."""
        ...

    async def complete(self, params: dict[str, Any]) -> dict[str, Any]:
        """The wire ``completion`` for one argument; ``METHOD_NOT_FOUND`` without a completer."""
        ...

    async def notify_session(
        self, session_id: str, method: str, params: dict[str, Any]
    ) -> None: ...

    def add_listener(self, listener: Listener) -> None: ...

    def remove_listener(self, listener: Listener) -> None: ...


__all__ = ["ExtensionMethod", "Listings", "Rounds", "Served"]
