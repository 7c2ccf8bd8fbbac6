"""``ctx.session``: the per-connection session API that handlers ported from other MCP SDKs
call, served by this engine's rounds.

Its questions (``elicit_form``, ``elicit_url``, ``create_message``, ``list_roots``) are asked as
a body asks them with ``ctx.ask``: in place on 2025-11-25, in an ``input_required`` result on
2026-07-28, where the body then runs again from the top (docs/context.md, "Ask from the body").
Its notifications go to the session's standalone stream on 2025-11-25; a 2026-07-28 request has
no such stream, and they are dropped. A notification sent with ``related_request_id`` belongs to
the request being served instead, and goes on that request's own stream in either era (a
``notifications/message`` only at the levels the client asked for, as ``ctx.log`` sends it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from engine._internal.logbridge import notify_in_order
from engine._internal.notify import Notify
from engine.questions.kinds import ElicitForm, ElicitURL, ListRoots, Question, Sample
from engine.types import (
    ClientCapabilities,
    CreateMessageResult,
    ElicitResult,
    ListRootsResult,
    ModelPreferences,
    SamplingMessage,
    Tool,
    ToolChoice,
    wire_of,
)


class Channel(Protocol):
    """Where a session's notifications go (the 2025-11-25 session's standalone stream):
    ``engine.scope.Session``."""

    async def send_notification(
        self, method: str, params: dict[str, Any] | None = None
    ) -> None: ...

    async def send_tool_list_changed(self) -> None: ...

    async def send_prompt_list_changed(self) -> None: ...

    async def send_resource_list_changed(self) -> None: ...

    async def send_resource_updated(self, uri: Any) -> None: ...


class Asker(Protocol):
    """What the session reaches of the request's Context."""

    async def ask(self, question: Question, *, key: str | None = None) -> Any: ...

    async def log(self, level: str, data: Any, *, logger_name: str | None = None) -> None: ...

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None: ...

    @property
    def client_capabilities(self) -> ClientCapabilities: ...


class RequestSession:
    """The session as one request's handler sees it."""

    __slots__ = ("_asker", "_capabilities", "_channel", "_notify")

    def __init__(
        self,
        asker: Asker,
        channel: Channel,
        capabilities: Mapping[str, Any],
        notify: Notify | None = None,
    ) -> None:
        self._asker = asker
        self._channel = channel
        self._capabilities = capabilities
        self._notify = notify
        """This request's own stream, when it has one."""

    # --- notifications -------------------------------------------------------------------------

    async def send_notification(
        self,
        notification: Any,
        params: dict[str, Any] | None = None,
        related_request_id: Any = None,
    ) -> None:
        """Send a notification: a method name and its params, or a notification object (a
        pydantic model with ``method`` and ``params``, such as the official SDK's). With
        ``related_request_id`` it goes on this request's stream, else to the session's."""
        if isinstance(notification, str):
            method, sent = notification, params
        else:
            wire = wire_of(notification)
            if not isinstance(wire, dict) or not isinstance(wire.get("method"), str):
                raise TypeError(
                    "send_notification takes a method name and its params, or a notification "
                    f"object with a method; got {type(notification).__name__}"
                )
            method, sent = wire["method"], wire.get("params")
        if related_request_id is None:
            await self._channel.send_notification(method, sent)
        elif method == "notifications/message" and isinstance(sent, dict):
            logger = sent.get("logger")
            await self._asker.log(
                str(sent.get("level")),
                sent.get("data"),
                logger_name=logger if isinstance(logger, str) else None,
            )
        else:
            if self._notify is not None:
                await notify_in_order(self._notify, method, sent or {})

    async def send_tool_list_changed(self) -> None:
        await self._channel.send_tool_list_changed()

    async def send_prompt_list_changed(self) -> None:
        await self._channel.send_prompt_list_changed()

    async def send_resource_list_changed(self) -> None:
        await self._channel.send_resource_list_changed()

    async def send_resource_updated(self, uri: Any) -> None:
        await self._channel.send_resource_updated(uri)

    async def send_elicit_complete(
        self, elicitation_id: str, related_request_id: Any = None
    ) -> None:
        """Tell the client the work behind a URL elicitation (``ctx.elicit_url(...,
        elicitation_id)``) is done, so it may retry what waited for it. With
        ``related_request_id`` it goes on this request's stream, else to the session's."""
        await self.send_notification(
            "notifications/elicitation/complete",
            {"elicitationId": elicitation_id},
            related_request_id=related_request_id,
        )

    async def send_log_message(
        self, level: str, data: Any, logger: str | None = None, related_request_id: Any = None
    ) -> None:
        """``ctx.log``: to this request's client, at the levels it asked for."""
        await self._asker.log(level, data, logger_name=logger)

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """``ctx.report_progress``: only when the request asked for progress."""
        await self._asker.report_progress(progress, total, message)

    # --- what the client declared ----------------------------------------------------------

    @property
    def client_capabilities(self) -> ClientCapabilities:
        """The capabilities the client declared: by attribute (``.sampling``, ``.extensions``),
        as the official SDK's model reads, or as a mapping of their wire form."""
        return self._asker.client_capabilities

    def check_client_capability(self, capability: Any) -> bool:
        """Whether the client declared ``capability``: a dict of the capabilities' wire form,
        or a pydantic model of it (the official SDK's ``ClientCapabilities``). Each capability
        named must be declared, with each of its own settings that is given."""
        wanted = wire_of(capability)
        if not isinstance(wanted, Mapping):
            raise TypeError(
                f"expected client capabilities (a dict or a model), got {type(capability).__name__}"
            )
        return covers(self._capabilities, wanted)

    # --- questions -----------------------------------------------------------------------------

    async def elicit_form(
        self, message: str, requested_schema: Mapping[str, Any], related_request_id: Any = None
    ) -> ElicitResult:
        """Show the user a form described by a JSON schema; the answer as the client sent it
        (``ctx.elicit`` validates it into a model instead)."""
        outcome = await self._asker.ask(ElicitForm(message, dict(requested_schema)))
        if outcome.action == "accept":
            return ElicitResult(action="accept", content=outcome.data)
        return ElicitResult(action=outcome.action)

    async def elicit(
        self, message: str, requested_schema: Mapping[str, Any], related_request_id: Any = None
    ) -> ElicitResult:
        """:meth:`elicit_form`, by its older name."""
        return await self.elicit_form(message, requested_schema)

    async def elicit_url(
        self, message: str, url: str, elicitation_id: str, related_request_id: Any = None
    ) -> ElicitResult:
        """Send the user to a URL; the answer says only whether they agreed to go."""
        outcome = await self._asker.ask(ElicitURL(message, url, elicitation_id))
        return ElicitResult(action=outcome.action)

    async def create_message(
        self,
        messages: Sequence[SamplingMessage],
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        include_context: Literal["none", "thisServer", "allServers"] | None = None,
        temperature: float | None = None,
        stop_sequences: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        model_preferences: ModelPreferences | None = None,
        tools: list[Tool] | None = None,
        tool_choice: ToolChoice | None = None,
        related_request_id: Any = None,
    ) -> CreateMessageResult:
        """Ask the client's model for a completion (``ctx.sample`` with every option)."""
        result: CreateMessageResult = await self._asker.ask(
            Sample(
                messages,
                max_tokens=max_tokens,
                system_prompt=system_prompt,
                include_context=include_context,
                temperature=temperature,
                stop_sequences=stop_sequences,
                metadata=metadata,
                model_preferences=model_preferences,
                tools=tools,
                tool_choice=tool_choice,
            )
        )
        return result

    async def list_roots(self) -> ListRootsResult:
        """The client's roots (``ctx.list_roots``)."""
        result: ListRootsResult = await self._asker.ask(ListRoots())
        return result


def covers(declared: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether ``declared`` capabilities include every one ``wanted`` names, recursively: a
    nested object must be declared with whatever it sets; a flag set to true must be true."""
    for name, value in wanted.items():
        if value is None or value is False:
            continue
        have = declared.get(name)
        if have is None:
            return False
        if isinstance(value, Mapping):
            if not isinstance(have, Mapping):
                return False
            if name == "elicitation" and not have:
                have = {"form": {}}  # an empty elicitation capability declares forms
            if not covers(have, value):
                return False
        elif have != value:
            return False
    return True


__all__ = ["RequestSession", "covers"]
