"""Wire types: the MCP objects a user builds or receives, as pydantic models.

Field names are snake_case in Python and camelCase on the wire. Unknown fields from a client are
kept (``extra="allow"``) so newer peers do not break older servers.

Wherever a user hands the server one of these, a dict of its wire shape or any pydantic model of
that shape does too: code written with the official SDK's ``mcp_types`` runs unchanged, without
this package depending on it (:meth:`WireModel.of`). For the same reason a model here equals any
model that has the same wire form.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

Role = Literal["user", "assistant"]


def wire_of(value: Any) -> Any:
    """The JSON form of a wire object given as one of ours, a dict, or another pydantic model."""
    if isinstance(value, WireModel):
        return value.to_wire()
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, Mapping):
        return dict(value)
    return value


class WireModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="allow", serialize_by_alias=True
    )

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    @classmethod
    def of(cls, value: Any) -> Self:
        """``value`` as this model: one already, a dict of its wire form (camelCase or
        snake_case keys), or any pydantic model of the same shape; a value that does not fit
        raises pydantic's ``ValidationError`` (a ``ValueError``) naming the field."""
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping | BaseModel):
            raise TypeError(
                f"expected a {cls.__name__} (or a dict of its fields), got {type(value).__name__}"
            )
        return cls.model_validate(wire_of(value))

    def __eq__(self, other: object) -> bool:
        if type(other) is type(self):
            return super().__eq__(other)
        if isinstance(other, BaseModel):
            theirs = wire_of(other)
            # The protocol layer stamps a 2026-07-28 result's resultType; a result a handler
            # builds has none of its own.
            theirs.pop("resultType", None)
            return bool(self.to_wire() == theirs)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class Annotations(WireModel):
    audience: list[Role] | None = None
    priority: float | None = None
    last_modified: str | None = None


class Icon(WireModel):
    src: str
    mime_type: str | None = None
    sizes: list[str] | None = None
    theme: Literal["light", "dark"] | None = None


class TextContent(WireModel):
    type: Literal["text"] = "text"
    text: str
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class ImageContent(WireModel):
    type: Literal["image"] = "image"
    data: str
    mime_type: str
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class AudioContent(WireModel):
    type: Literal["audio"] = "audio"
    data: str
    mime_type: str
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class ResourceLink(WireModel):
    type: Literal["resource_link"] = "resource_link"
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class TextResourceContents(WireModel):
    uri: str
    mime_type: str | None = None
    text: str
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class BlobResourceContents(WireModel):
    uri: str
    mime_type: str | None = None
    blob: str
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class EmbeddedResource(WireModel):
    type: Literal["resource"] = "resource"
    resource: TextResourceContents | BlobResourceContents
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class ToolUseContent(WireModel):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any]
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class ToolResultContent(WireModel):
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: list[ContentBlock] = Field(default_factory=list)
    structured_content: Any = None
    is_error: bool | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


ContentBlock = Annotated[
    TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource,
    Field(discriminator="type"),
]
SamplingContent = Annotated[TextContent | ImageContent | AudioContent, Field(discriminator="type")]
SamplingContentWithTools = Annotated[
    TextContent | ImageContent | AudioContent | ToolUseContent | ToolResultContent,
    Field(discriminator="type"),
]


class SamplingMessage(WireModel):
    role: Role
    content: SamplingContentWithTools | list[SamplingContentWithTools]
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class ModelHint(WireModel):
    name: str | None = None


class ModelPreferences(WireModel):
    hints: list[ModelHint] | None = None
    cost_priority: float | None = None
    speed_priority: float | None = None
    intelligence_priority: float | None = None


class ToolAnnotations(WireModel):
    title: str | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None


class Tool(WireModel):
    """A tool as listed by ``tools/list`` (and as offered to a model in sampling)."""

    name: str
    title: str | None = None
    description: str | None = None
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    annotations: ToolAnnotations | None = None
    icons: list[Icon] | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class ToolChoice(WireModel):
    mode: Literal["auto", "required", "none"] | None = None


class CreateMessageResult(WireModel):
    """The client's answer to a sampling question without tools."""

    role: Role
    content: SamplingContent
    model: str
    stop_reason: str | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class CreateMessageResultWithTools(WireModel):
    """The client's answer to a sampling question that offered tools."""

    role: Role
    content: SamplingContentWithTools | list[SamplingContentWithTools]
    model: str
    stop_reason: str | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class Root(WireModel):
    uri: str
    name: str | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class ListRootsResult(WireModel):
    roots: list[Root]
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class ElicitResult(WireModel):
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, str | int | float | bool | list[str] | None] | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class CallToolResult(WireModel):
    content: list[ContentBlock] = Field(default_factory=list)
    structured_content: Any = None
    is_error: bool = False
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class PromptMessage(WireModel):
    role: Role
    content: ContentBlock


class GetPromptResult(WireModel):
    description: str | None = None
    messages: list[PromptMessage]
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class PromptArgument(WireModel):
    name: str
    title: str | None = None
    description: str | None = None
    required: bool | None = None


class Prompt(WireModel):
    """A prompt as listed by ``prompts/list``."""

    name: str
    title: str | None = None
    description: str | None = None
    arguments: list[PromptArgument] | None = None
    icons: list[Icon] | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class Resource(WireModel):
    """A resource at a fixed URI, as listed by ``resources/list``."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    icons: list[Icon] | None = None
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class ResourceTemplate(WireModel):
    """A resource template, as listed by ``resources/templates/list``."""

    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    icons: list[Icon] | None = None
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class PromptReference(WireModel):
    """What a ``completion/complete`` request completes an argument of: a prompt..."""

    type: Literal["ref/prompt"] = "ref/prompt"
    name: str
    title: str | None = None


class ResourceTemplateReference(WireModel):
    """... or a resource template."""

    type: Literal["ref/resource"] = "ref/resource"
    uri: str


class CompletionArgument(WireModel):
    """The argument being completed: its name and what has been typed so far."""

    name: str
    value: str


class CompletionContext(WireModel):
    """The arguments of the same prompt or template the client already knows."""

    arguments: dict[str, str] | None = None


class Completion(WireModel):
    """Suggested values for an argument (at most 100 on the wire), and how many there are."""

    values: list[str]
    total: int | None = None
    has_more: bool | None = None


class ClientCapabilities(WireModel, Mapping[str, Any]):
    """What a client declared it supports; each part a dict as sent (``None``: not declared).

    It reads both ways: by attribute (``caps.sampling``, ``caps.extensions``), as code written
    for the official SDK's model does, and as a read-only mapping of its wire form
    (``caps["sampling"]``, ``caps.get("extensions")``, ``dict(caps)``), equal to a dict of that
    form.
    """

    experimental: dict[str, Any] | None = None
    roots: dict[str, Any] | None = None
    sampling: dict[str, Any] | None = None
    elicitation: dict[str, Any] | None = None
    tasks: dict[str, Any] | None = None
    extensions: dict[str, dict[str, Any]] | None = None

    @classmethod
    def declared(cls, wire: Mapping[str, Any]) -> Self:
        """The capabilities a client sent, as they came: one that is not of the shape the
        protocol gives it (``"sampling": true``, say) is left out, as not declared."""
        try:
            return cls.model_validate(wire)
        except ValidationError as exc:
            malformed = {error["loc"][0] for error in exc.errors() if error["loc"]}
            return cls.model_validate({k: v for k, v in wire.items() if k not in malformed})

    def __getitem__(self, key: str) -> Any:
        return self.to_wire()[key]

    def __iter__(self) -> Iterator[str]:  # type: ignore[override]  # a mapping's keys
        return iter(self.to_wire())

    def __len__(self) -> int:
        return len(self.to_wire())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping) and not isinstance(other, BaseModel):
            return self.to_wire() == dict(other)
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]


class ElicitRequestFormParams(WireModel):
    mode: Literal["form"] = "form"
    message: str
    requested_schema: dict[str, Any]
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class ElicitRequestURLParams(WireModel):
    mode: Literal["url"] = "url"
    message: str
    url: str
    elicitation_id: str | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class ElicitRequest(WireModel):
    """A question for the user, as a handler puts it in an :class:`InputRequiredResult`."""

    method: Literal["elicitation/create"] = "elicitation/create"
    params: ElicitRequestFormParams | ElicitRequestURLParams


class CreateMessageRequestParams(WireModel):
    messages: list[SamplingMessage]
    max_tokens: int
    system_prompt: str | None = None
    include_context: Literal["none", "thisServer", "allServers"] | None = None
    temperature: float | None = None
    stop_sequences: list[str] | None = None
    metadata: dict[str, Any] | None = None
    model_preferences: ModelPreferences | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class CreateMessageRequest(WireModel):
    """A request for the client's model, as a handler puts it in an :class:`InputRequiredResult`."""

    method: Literal["sampling/createMessage"] = "sampling/createMessage"
    params: CreateMessageRequestParams


class ListRootsRequest(WireModel):
    """A request for the client's roots, as a handler puts it in an :class:`InputRequiredResult`."""

    method: Literal["roots/list"] = "roots/list"
    params: dict[str, Any] | None = None


InputRequest = Annotated[
    ElicitRequest | CreateMessageRequest | ListRootsRequest, Field(discriminator="method")
]


class InputRequiredResult(WireModel):
    """What a handler returns to ask the client for input itself (2026-07-28): its requests by
    key, and a string of its own that comes back as ``ctx.request_state`` on the retry. The
    server seals that string into its own ``requestState``; it never goes out as it is."""

    input_requests: dict[str, InputRequest] | None = None
    request_state: str | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


ToolResultContent.model_rebuild()

__all__ = [
    "Annotations",
    "AudioContent",
    "BlobResourceContents",
    "CallToolResult",
    "ClientCapabilities",
    "Completion",
    "CompletionArgument",
    "CompletionContext",
    "ContentBlock",
    "CreateMessageRequest",
    "CreateMessageRequestParams",
    "CreateMessageResult",
    "CreateMessageResultWithTools",
    "ElicitRequest",
    "ElicitRequestFormParams",
    "ElicitRequestURLParams",
    "ElicitResult",
    "EmbeddedResource",
    "GetPromptResult",
    "Icon",
    "ImageContent",
    "InputRequest",
    "InputRequiredResult",
    "ListRootsRequest",
    "ListRootsResult",
    "ModelHint",
    "ModelPreferences",
    "Prompt",
    "PromptArgument",
    "PromptMessage",
    "PromptReference",
    "Resource",
    "ResourceLink",
    "ResourceTemplate",
    "ResourceTemplateReference",
    "Role",
    "Root",
    "SamplingMessage",
    "TextContent",
    "TextResourceContents",
    "Tool",
    "ToolAnnotations",
    "ToolChoice",
    "ToolResultContent",
    "ToolUseContent",
    "WireModel",
    "wire_of",
]
