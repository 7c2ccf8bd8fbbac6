"""The fixtures the official MCP conformance suite calls (``make conformance``)."""

from __future__ import annotations

import base64
import logging
from typing import Annotated, Any, Literal

import anyio
from pydantic import BaseModel, Field

from engine import (
    AcceptedElicitation,
    Context,
    Elicit,
    ListRoots,
    MCPError,
    MCPServer,
    Resolve,
    Sample,
    ToolError,
)
from engine.types import (
    AudioContent,
    CreateMessageResult,
    EmbeddedResource,
    ImageContent,
    ListRootsResult,
    PromptMessage,
    SamplingMessage,
    TextContent,
    TextResourceContents,
)

mcp = MCPServer("engine-conformance", version="1.0.0", trust_unsolicited_answers=True)

# A 1x1 transparent PNG and a tiny silent WAV.
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
).decode()
WAV = base64.b64encode(
    b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x40\x1f\x00\x00"
    b"\x80>\x00\x00\x02\x00\x10\x00data\x00\x00\x00\x00"
).decode()


# --- plain tools --------------------------------------------------------------------------------


@mcp.tool()
def test_simple_text() -> str:
    """Returns a simple text response."""
    return "This is a simple text response for testing."


@mcp.tool()
def test_image_content() -> ImageContent:
    """Returns an image."""
    return ImageContent(data=PNG, mime_type="image/png")


@mcp.tool()
def test_audio_content() -> AudioContent:
    """Returns an audio clip."""
    return AudioContent(data=WAV, mime_type="audio/wav")


@mcp.tool()
def test_embedded_resource() -> EmbeddedResource:
    """Returns an embedded resource."""
    return EmbeddedResource(
        resource=TextResourceContents(
            uri="test://embedded-resource",
            mime_type="text/plain",
            text="This is an embedded resource content.",
        )
    )


@mcp.tool()
def test_multiple_content_types() -> list[Any]:
    """Returns text, an image and a resource."""
    return [
        TextContent(text="Multiple content types test:"),
        ImageContent(data=PNG, mime_type="image/png"),
        EmbeddedResource(
            resource=TextResourceContents(
                uri="test://mixed-content-resource",
                mime_type="application/json",
                text='{"test": "data", "value": 123}',
            )
        ),
    ]


@mcp.tool()
def test_error_handling() -> str:
    """Always fails, as a tool error the model can read."""
    raise ToolError("This tool intentionally returns an error for testing")


@mcp.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress three times, then answers."""
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100, f"step {step}")
    return "Progress complete"


ADDRESS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "additionalProperties": False,
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
}


@mcp.tool(input_schema=ADDRESS_SCHEMA)
def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, Any] | None = None,
    contactMethod: str | None = None,
    phone: str | None = None,
    email: str | None = None,
) -> str:
    """A tool whose input schema uses JSON Schema 2020-12 features."""
    return f"Received {name or 'no name'}"


@mcp.tool()
def test_x_mcp_header(
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})] = "<none>",
) -> str:
    """Mirrors its region argument into the Mcp-Param-Region header."""
    return f"region={region}"


def _sample(text: str, max_tokens: int = 100) -> Sample:
    return Sample(
        [SamplingMessage(role="user", content=TextContent(text=text))], max_tokens=max_tokens
    )


def needs_sampling() -> Sample:
    return _sample("Say hello")


@mcp.tool()
def test_missing_capability(
    reply: Annotated[CreateMessageResult, Resolve(needs_sampling)],
) -> str:
    """Needs the sampling capability."""
    return "sampled"


def changing_tool() -> str:
    """Appears after test_trigger_tool_change."""
    return "changed"


def changing_prompt() -> str:
    """Appears after test_trigger_prompt_change."""
    return "changed"


@mcp.tool()
async def test_trigger_tool_change(ctx: Context) -> str:
    """Adds a tool and tells every subscribed stream."""
    mcp.add_tool(changing_tool)
    await ctx.notify_tools_changed()
    return "tools changed"


@mcp.tool()
async def test_trigger_prompt_change(ctx: Context) -> str:
    """Adds a prompt and tells every subscribed stream."""
    mcp.add_prompt(changing_prompt)
    await ctx.notify_prompts_changed()
    return "prompts changed"


# --- multi-round (input_required) tools ---------------------------------------------------------


class UserName(BaseModel):
    name: str


class Favourite(BaseModel):
    color: str


class Ok(BaseModel):
    ok: bool


class UserContext(BaseModel):
    context: str


def user_name() -> Elicit[UserName]:
    return Elicit("What is your name?", UserName)


def capital_question() -> Sample:
    return _sample("What is the capital of France?")


def client_roots() -> ListRoots:
    return ListRoots()


@mcp.tool()
def test_input_required_result_elicitation(
    who: Annotated[UserName, Resolve(user_name)],
) -> str:
    """Asks for the user's name."""
    return f"Hello, {who.name}!"


@mcp.tool()
def test_input_required_result_tampered_state(
    who: Annotated[UserName, Resolve(user_name)],
) -> str:
    """Asks for the user's name; its requestState is sealed."""
    return f"Hello, {who.name}!"


@mcp.tool()
def test_input_required_result_sampling(
    answer: Annotated[CreateMessageResult, Resolve(capital_question)],
) -> str:
    """Asks the client's model a question."""
    text = answer.content.text if answer.content.type == "text" else "(no text)"
    return f"The model said: {text}"


@mcp.tool()
def test_input_required_result_list_roots(
    roots: Annotated[ListRootsResult, Resolve(client_roots)],
) -> str:
    """Asks the client for its roots."""
    return "Roots: " + ", ".join(root.uri for root in roots.roots)


def confirm_state() -> Elicit[Ok]:
    return Elicit("Continue with the stored state?", Ok)


@mcp.tool()
def test_input_required_result_request_state(
    answer: Annotated[Ok, Resolve(confirm_state)],
) -> str:
    """Carries state between rounds."""
    return "state-ok" if answer.ok else "state-declined"


@mcp.tool()
def test_input_required_result_multiple_inputs(
    who: Annotated[UserName, Resolve(user_name)],
    answer: Annotated[CreateMessageResult, Resolve(capital_question)],
    roots: Annotated[ListRootsResult, Resolve(client_roots)],
) -> str:
    """Asks three independent questions at once."""
    return f"{who.name}; {len(roots.roots)} roots; sampled with {answer.model}"


def favourite_color(who: Annotated[UserName, Resolve(user_name)]) -> Elicit[Favourite]:
    return Elicit(f"What is your favourite colour, {who.name}?", Favourite)


@mcp.tool()
def test_input_required_result_multi_round(
    who: Annotated[UserName, Resolve(user_name)],
    favourite: Annotated[Favourite, Resolve(favourite_color)],
) -> str:
    """Two dependent questions: two rounds of input, then the result."""
    return f"{who.name} likes {favourite.color}"


def sampling_if_declared(ctx: Context) -> Sample | None:
    return capital_question() if "sampling" in ctx.client_capabilities else None


def elicitation_if_declared(ctx: Context) -> Elicit[UserName] | None:
    return user_name() if "elicitation" in ctx.client_capabilities else None


@mcp.tool()
def test_input_required_result_capabilities(
    answer: Annotated[CreateMessageResult | None, Resolve(sampling_if_declared)],
    who: Annotated[UserName | None, Resolve(elicitation_if_declared)],
) -> str:
    """Asks only what the client declared it can answer."""
    return f"sampling={answer is not None} elicitation={who is not None}"


# --- 2025-11-25 fixtures: questions on the back-channel, logging, resumable streams -----------

log = logging.getLogger("conformance.tools")
log.setLevel(logging.DEBUG)


@mcp.tool()
async def test_tool_with_logging() -> str:
    """Logs three lines, about 50 ms apart; they reach a client that asked for logs."""
    for step in range(1, 4):
        log.info("logging step %d of 3", step)
        await anyio.sleep(0.05)
    return "Logged three messages"


class Contact(BaseModel):
    username: str = Field(description="Your user name")
    email: str = Field(description="Your email address")


@mcp.tool()
async def test_elicitation(message: str, ctx: Context) -> str:
    """Asks the user for contact details, mid-call."""
    answer = await ctx.elicit(message, Contact)
    if isinstance(answer, AcceptedElicitation):
        return f"User provided: {answer.data.username} <{answer.data.email}>"
    return f"User {answer.action}d the request"


@mcp.tool()
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Asks the client's model, mid-call."""
    reply = await ctx.sample(prompt, max_tokens=100)
    text = reply.content.text if reply.content.type == "text" else "(non-text reply)"
    return f"LLM response: {text}"


class Defaults(BaseModel):
    name: str = Field("John Doe", description="User name")
    age: int = Field(30, description="User age")
    score: float = Field(95.5, description="User score")
    status: Literal["active", "inactive", "pending"] = Field("active", description="User status")
    verified: bool = Field(True, description="Verification status")


@mcp.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """A form whose every field has a default."""
    answer = await ctx.elicit("Please review the defaults", Defaults)
    return f"Elicitation result: {answer.action}"


class Enums(BaseModel):
    untitledSingle: Literal["option1", "option2", "option3"]
    titledSingle: str = Field(
        json_schema_extra={
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
            ]
        }
    )
    legacyEnum: Literal["opt1", "opt2"] = Field(
        json_schema_extra={"enumNames": ["Option One", "Option Two"]}
    )
    untitledMulti: list[Literal["option1", "option2", "option3"]]
    titledMulti: list[str] = Field(
        json_schema_extra={
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                ]
            }
        }
    )


@mcp.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """A form with the five kinds of enum field."""
    answer = await ctx.elicit("Please pick from the enums", Enums)
    return f"Elicitation result: {answer.action}"


@mcp.tool()
async def test_reconnection(ctx: Context) -> str:
    """Closes its event stream mid-call; the client resumes it to get this answer."""
    await ctx.close_sse_stream()
    await anyio.sleep(0.2)
    return "Reconnection test completed successfully"


# --- tasks (the Tasks extension, docs/tasks.md) -------------------------------------------------


@mcp.tool()
def greet(name: str) -> str:
    """Greets at once: never a task."""
    return f"Hello, {name}!"


@mcp.tool(task=lambda seconds: seconds > 0)
async def slow_compute(seconds: float, label: str = "") -> str:
    """Works for ``seconds`` seconds, as a task (at once, without one, for 0)."""
    await anyio.sleep(seconds)
    return f"Computed {label or 'a result'} in {seconds:g} s"


@mcp.tool(task="required")
async def failing_job() -> str:
    """Fails after a second, as a tool error: the task completes with ``isError``."""
    await anyio.sleep(1)
    raise ToolError("This job always fails")


@mcp.tool(task=True)
def protocol_error_job() -> str:
    """Fails with a JSON-RPC error: the task fails."""
    raise MCPError(-32603, "This job hit an internal error")


class Confirmation(BaseModel):
    confirm: bool


@mcp.tool(task=True)
async def confirm_delete(filename: str, ctx: Context) -> str:
    """Asks, inside the task, before it deletes."""
    answer = await ctx.elicit(f"Delete {filename}?", Confirmation)
    if isinstance(answer, AcceptedElicitation) and answer.data.confirm:
        return f"Deleted {filename}"
    return f"Kept {filename}"


@mcp.tool(task=True)
async def multi_input(ctx: Context) -> str:
    """Asks two questions at once, inside the task."""
    first, second = await ctx.ask_all(
        Elicit("A name for the first item?", UserName),
        Elicit("A name for the second item?", UserName),
    )
    names = [a.data.name for a in (first, second) if isinstance(a, AcceptedElicitation)]
    return f"Named {' and '.join(names) or 'nothing'}"


@mcp.tool(task="required")
def test_tool_with_task(who: Annotated[UserName, Resolve(user_name)]) -> str:
    """Asks for a name over rounds, then runs as a task."""
    return f"Hello, {who.name}, from a task!"


# --- prompts ------------------------------------------------------------------------------------


@mcp.prompt()
def test_simple_prompt() -> str:
    """A prompt without arguments."""
    return "This is a simple prompt for testing."


@mcp.prompt()
def test_prompt_with_arguments(
    arg1: Annotated[str, Field(description="First test argument")],
    arg2: Annotated[str, Field(description="Second test argument")],
) -> str:
    """A prompt with two required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@mcp.prompt()
def test_prompt_with_embedded_resource(
    resourceUri: Annotated[str, Field(description="URI of the resource to embed")],
) -> list[PromptMessage]:
    """A prompt that embeds a resource."""
    return [
        PromptMessage(
            role="user",
            content=EmbeddedResource(
                resource=TextResourceContents(
                    uri=resourceUri, mime_type="text/plain", text="Embedded resource content."
                )
            ),
        ),
        PromptMessage(role="user", content=TextContent(text="Please process the resource.")),
    ]


@mcp.prompt()
def test_prompt_with_image() -> list[PromptMessage]:
    """A prompt with an image."""
    return [
        PromptMessage(role="user", content=ImageContent(data=PNG, mime_type="image/png")),
        PromptMessage(role="user", content=TextContent(text="Please describe the image.")),
    ]


def ask_context() -> Elicit[UserContext]:
    return Elicit("What context should the prompt use?", UserContext)


@mcp.prompt()
def test_input_required_result_prompt(
    given: Annotated[UserContext, Resolve(ask_context, key="user_context")],
) -> str:
    """A prompt that asks for context before it renders."""
    return f"Prompt rendered with context: {given.context}"


@mcp.completion()
def complete(ref: dict[str, Any], argument: dict[str, Any], context: Any) -> list[str]:
    if ref.get("name") == "test_prompt_with_arguments":
        prefix = str(argument.get("value", ""))
        return [v for v in ("paris", "park", "partial") if v.startswith(prefix)]
    return []


# --- resources ----------------------------------------------------------------------------------


@mcp.resource("test://static-text", mime_type="text/plain")
def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@mcp.resource("test://static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource."""
    return base64.b64decode(PNG)


@mcp.resource("test://template/{id}/data", mime_type="application/json")
def template_data(id: str) -> str:
    """Data for one id."""
    return f'{{"id": "{id}", "templateTest": true, "data": "Data for ID: {id}"}}'


@mcp.resource("test://watched-resource", mime_type="text/plain")
def watched_resource() -> str:
    """A resource clients can subscribe to."""
    return "Watched resource content"
