"""Questions a resolver or a tool body can ask the client, and the answers they get back.

A question renders to the ``params`` of an MCP request (``elicitation/create``,
``sampling/createMessage`` or ``roots/list``). Its fingerprint, a digest of those params, pins a
recorded answer to the exact question it answered: a reworded question is asked again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel, ValidationError
from typing_extensions import TypeAliasType

from engine._internal.typecache import instance_test
from engine.errors import MISSING_CLIENT_CAPABILITY, MCPError
from engine.questions.forms import elicitation_schema
from engine.types import (
    CreateMessageResult,
    CreateMessageResultWithTools,
    ListRootsResult,
    ModelPreferences,
    SamplingMessage,
    Tool,
    ToolChoice,
)

T = TypeVar("T")
ModelT = TypeVar("ModelT", bound=BaseModel)


class AcceptedElicitation(BaseModel, Generic[T]):
    """The user answered the form; ``data`` is the validated answer."""

    action: Literal["accept"] = "accept"
    data: T


class DeclinedElicitation(BaseModel):
    """The user saw the question and said no."""

    action: Literal["decline"] = "decline"


class CancelledElicitation(BaseModel):
    """The user dismissed the question without choosing."""

    action: Literal["cancel"] = "cancel"


ElicitationResult = TypeAliasType(
    "ElicitationResult",
    AcceptedElicitation[T] | DeclinedElicitation | CancelledElicitation,
    type_params=(T,),
)

Accepted = AcceptedElicitation[Any]
"""``AcceptedElicitation`` for any data, built once (subscripting a generic model is not free)."""
OUTCOMES = (AcceptedElicitation, DeclinedElicitation, CancelledElicitation)
REFUSALS = (DeclinedElicitation, CancelledElicitation)
is_outcome = instance_test(*OUTCOMES)
is_accepted = instance_test(AcceptedElicitation)
is_refusal = instance_test(*REFUSALS)

Outcome = Any
"""What a question resolves to: an elicitation outcome, a sampling result or the roots."""


class BadAnswer(ValueError):
    """An answer that cannot be used for its question; the question is asked again."""


class Question:
    """One question; subclasses say how it renders, what it needs and how answers parse."""

    method: ClassVar[str]
    kind: ClassVar[str]

    def render(self) -> dict[str, Any]:
        raise NotImplementedError

    def missing_capability(self, capabilities: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        """``(name, requiredCapabilities)`` when the client cannot receive this question."""
        raise NotImplementedError

    def parse(self, answer: Any) -> Outcome:
        """The outcome of a wire answer (recorded or fresh); :class:`BadAnswer` when unusable."""
        raise NotImplementedError

    def settles(self, outcome: Outcome) -> bool:
        """Whether this outcome answers the question for good (a URL accept does not)."""
        return True

    def kept(self, outcome: Outcome) -> Any:
        """The answer as the call's state and journal keep it: what :meth:`parse` validated
        into ``outcome``, and nothing else a client sent along (it parses to the same
        outcome)."""
        raise NotImplementedError

    def capability_error(self, capabilities: dict[str, Any], asker: str) -> MCPError | None:
        missing = self.missing_capability(capabilities)
        if missing is None:
            return None
        name, required = missing
        return MCPError(
            MISSING_CLIENT_CAPABILITY,
            f"Client did not declare the {name} capability required by {asker}",
            {"requiredCapabilities": required},
        )


class _Elicitation(Question):
    """What both modes of ``elicitation/create`` share: how an answer is read, declined or
    cancelled; each mode says what an accepted answer gives."""

    method = "elicitation/create"

    def missing_capability(self, capabilities: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        """What a client lacks to be shown a form (an empty ``elicitation`` declares forms);
        a URL elicitation says otherwise."""
        elicitation = capabilities.get("elicitation")
        if isinstance(elicitation, dict) and (not elicitation or "form" in elicitation):
            return None
        return "form elicitation", {"elicitation": {"form": {}}}

    def parse(self, answer: Any) -> Outcome:
        if not isinstance(answer, dict):
            raise BadAnswer("an elicitation answer must be an object")
        action = answer.get("action")
        if action == "accept":
            return self.accepted(answer.get("content"))
        if action == "decline":
            return DeclinedElicitation()
        if action == "cancel":
            return CancelledElicitation()
        raise BadAnswer("an elicitation answer needs action accept, decline or cancel")

    def accepted(self, content: Any) -> Outcome:
        """The outcome of an answer that accepts with this ``content``."""
        raise NotImplementedError

    def kept(self, outcome: Outcome) -> Any:
        if isinstance(outcome, AcceptedElicitation):
            return self.kept_acceptance(outcome)
        return {"action": outcome.action}

    def kept_acceptance(self, outcome: AcceptedElicitation[Any]) -> dict[str, Any]:
        return {"action": "accept"}


class Elicit(_Elicitation, Generic[ModelT]):
    """Ask the user to fill a form described by a flat pydantic model."""

    kind = "elicit"

    def __init__(self, message: str, schema: type[ModelT]) -> None:
        self.message = message
        self.schema = schema

    def render(self) -> dict[str, Any]:
        return {
            "mode": "form",
            "message": self.message,
            "requestedSchema": elicitation_schema(self.schema),
        }

    def accepted(self, content: Any) -> Outcome:
        if not isinstance(content, dict):
            raise BadAnswer("an accepted form elicitation needs content")
        try:
            data = self.schema.model_validate(content)
        except ValidationError as exc:
            raise BadAnswer("the accepted content does not match the requested schema") from exc
        return Accepted(data=data)

    def kept_acceptance(self, outcome: AcceptedElicitation[Any]) -> dict[str, Any]:
        content = outcome.data.model_dump(mode="json", by_alias=True)
        return {"action": "accept", "content": content}


class ElicitForm(_Elicitation):
    """Ask the user to fill a form given as a JSON schema (``ctx.session.elicit_form``): the
    accepted content comes back as the client sent it, unvalidated."""

    kind = "elicit"

    def __init__(self, message: str, requested_schema: dict[str, Any]) -> None:
        self.message = message
        self.requested_schema = requested_schema

    def render(self) -> dict[str, Any]:
        return {"mode": "form", "message": self.message, "requestedSchema": self.requested_schema}

    def accepted(self, content: Any) -> Outcome:
        if content is not None and not isinstance(content, dict):
            raise BadAnswer("the accepted content of a form must be an object")
        return Accepted(data=content)

    def kept_acceptance(self, outcome: AcceptedElicitation[Any]) -> dict[str, Any]:
        if outcome.data is None:
            return {"action": "accept"}
        return {"action": "accept", "content": outcome.data}


class ElicitURL(_Elicitation):
    """Send the user to a URL (sign-in, payment, anything that must not pass through the client).

    Accepting only means the user agreed to open the page. A resolver that returns the same
    ``ElicitURL`` again on the next round (because the work behind the URL is not done yet) asks
    again; a body that calls ``ctx.elicit_url`` gets the user's choice back.
    """

    kind = "elicit_url"

    def __init__(self, message: str, url: str, elicitation_id: str | None = None) -> None:
        self.message = message
        self.url = url
        self.elicitation_id = elicitation_id
        """What the client is told the elicitation is called, for the
        ``notifications/elicitation/complete`` that ends it; without one, each asking gets a
        random one."""

    def render(self) -> dict[str, Any]:
        params = {"mode": "url", "message": self.message, "url": self.url}
        if self.elicitation_id is not None:
            params["elicitationId"] = self.elicitation_id
        return params

    def missing_capability(self, capabilities: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        elicitation = capabilities.get("elicitation")
        if isinstance(elicitation, dict) and "url" in elicitation:
            return None
        return "URL elicitation", {"elicitation": {"url": {}}}

    def accepted(self, content: Any) -> Outcome:
        return Accepted(data=None)

    def settles(self, outcome: Outcome) -> bool:
        return not isinstance(outcome, AcceptedElicitation)


class Sample(Question):
    """Ask the client's model for a completion (``sampling/createMessage``)."""

    method = "sampling/createMessage"
    kind = "sample"

    def __init__(
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
    ) -> None:
        self.messages = [SamplingMessage.of(m) for m in messages]
        self.max_tokens = max_tokens
        self.system_prompt = system_prompt
        self.include_context = include_context
        self.temperature = temperature
        self.stop_sequences = stop_sequences
        self.metadata = metadata
        self.model_preferences = (
            None if model_preferences is None else ModelPreferences.of(model_preferences)
        )
        self.tools = None if tools is None else [Tool.of(t) for t in tools]
        self.tool_choice = None if tool_choice is None else ToolChoice.of(tool_choice)

    @property
    def uses_tools(self) -> bool:
        return self.tools is not None or self.tool_choice is not None

    def render(self) -> dict[str, Any]:
        params: dict[str, Any] = {
            "messages": [m.to_wire() for m in self.messages],
            "maxTokens": self.max_tokens,
        }
        optional: dict[str, Any] = {
            "systemPrompt": self.system_prompt,
            "includeContext": self.include_context,
            "temperature": self.temperature,
            "stopSequences": self.stop_sequences,
            "metadata": self.metadata,
            "modelPreferences": self.model_preferences.to_wire()
            if self.model_preferences
            else None,
            "tools": [t.to_wire() for t in self.tools] if self.tools is not None else None,
            "toolChoice": self.tool_choice.to_wire() if self.tool_choice else None,
        }
        params.update((k, v) for k, v in optional.items() if v is not None)
        return params

    def missing_capability(self, capabilities: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        sampling = capabilities.get("sampling")
        if not isinstance(sampling, dict):
            return "sampling", {"sampling": {}}
        if self.uses_tools and not isinstance(sampling.get("tools"), dict):
            return "sampling.tools", {"sampling": {"tools": {}}}
        return None

    def parse(self, answer: Any) -> Outcome:
        model = CreateMessageResultWithTools if self.uses_tools else CreateMessageResult
        try:
            return model.model_validate(declared(model.model_validate(answer)))
        except ValidationError as exc:
            raise BadAnswer("the answer is not a sampling result") from exc

    def kept(self, outcome: Outcome) -> Any:
        return outcome.to_wire()


class ListRoots(Question):
    """Ask the client for its current roots (``roots/list``)."""

    method = "roots/list"
    kind = "roots"

    def render(self) -> dict[str, Any]:
        return {}

    def missing_capability(self, capabilities: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        if isinstance(capabilities.get("roots"), dict):
            return None
        return "roots", {"roots": {}}

    def parse(self, answer: Any) -> Outcome:
        try:
            return ListRootsResult.model_validate(declared(ListRootsResult.model_validate(answer)))
        except ValidationError as exc:
            raise BadAnswer("the answer is not a roots list") from exc

    def kept(self, outcome: Outcome) -> Any:
        return outcome.to_wire()


def declared(value: Any) -> Any:
    """A wire model's declared fields, recursively, by their wire names: the fields a client
    added beyond the schema (which wire models keep, as ``extra="allow"``) left out."""
    if isinstance(value, BaseModel):
        out = {}
        for name, info in type(value).model_fields.items():
            field = getattr(value, name)
            if field is not None:
                out[info.alias or name] = declared(field)
        return out
    if isinstance(value, list):
        return [declared(item) for item in value]
    return value


__all__ = [
    "AcceptedElicitation",
    "BadAnswer",
    "CancelledElicitation",
    "DeclinedElicitation",
    "Elicit",
    "ElicitForm",
    "ElicitURL",
    "ElicitationResult",
    "ListRoots",
    "Question",
    "Sample",
]
