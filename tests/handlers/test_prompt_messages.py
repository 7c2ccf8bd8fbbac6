"""What a prompt returns becomes its messages: strings, ``UserMessage`` / ``AssistantMessage``,
content blocks (ours or the official ``mcp_types``), ``Image`` and ``Audio``, dicts; and a
prompt made with ``Prompt.from_function``, registered with ``add_prompt`` or rendered in
process."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated, Any

import mcp_types
import pytest
from pydantic import BaseModel, Field

from engine import (
    AssistantMessage,
    Audio,
    Elicit,
    Image,
    MCPServer,
    Message,
    Prompt,
    Resolve,
    UserMessage,
)
from engine.testing import Client
from engine.types import (
    ElicitRequest,
    ElicitRequestFormParams,
    ImageContent,
    InputRequiredResult,
    TextContent,
)
from tests.conftest import KEY

pytestmark = pytest.mark.anyio

PNG = {"type": "image", "data": "aW1n", "mimeType": "image/png"}


def text(role: str, words: str) -> dict[str, Any]:
    return {"role": role, "content": {"type": "text", "text": words}}


async def messages_of(returned: Any) -> list[dict[str, Any]]:
    mcp = MCPServer("Prompts", keys=[KEY])

    def conversation() -> Any:
        return returned

    mcp.add_prompt(conversation)
    async with Client(mcp) as client:
        result = await client.get_prompt("conversation")
    messages: list[dict[str, Any]] = result.raw["messages"]
    return messages


def test_a_message_takes_a_string_a_helper_or_an_official_block() -> None:
    document = mcp_types.EmbeddedResource(
        resource=mcp_types.TextResourceContents(uri="file://notes.md", text="notes")
    )
    assert UserMessage("Hello").to_wire() == text("user", "Hello")
    assert AssistantMessage(content="Hi").to_wire() == text("assistant", "Hi")
    assert Message("Hey", role="assistant") == AssistantMessage("Hey")
    assert UserMessage(Image(data=b"img", format="png")).content == ImageContent(
        data="aW1n", mime_type="image/png"
    )
    assert UserMessage(Audio(data=b"snd")).content.to_wire()["mimeType"] == "audio/wav"
    assert UserMessage(document).to_wire()["content"]["resource"]["uri"] == "file://notes.md"
    assert UserMessage(mcp_types.TextContent(text="x")) == UserMessage(TextContent(text="x"))


def test_a_model_that_is_no_block_is_refused_as_content() -> None:
    class Note(BaseModel):
        """Text by its fields, but its type is any string: not a block's shape."""

        type: str = "text"
        text: str

    with pytest.raises(ValueError, match="content"):
        UserMessage(Note(text="hi"))


async def test_bare_content_becomes_user_messages() -> None:
    block = mcp_types.ImageContent(data="aW1n", mime_type="image/png")
    assert await messages_of(Image(data=b"img")) == [{"role": "user", "content": PNG}]
    assert await messages_of(["Look:", block]) == [
        text("user", "Look:"),
        {"role": "user", "content": PNG},
    ]


async def test_a_conversation_keeps_its_roles_in_order() -> None:
    returned = [UserMessage("I see an error"), AssistantMessage("What have you tried?")]
    assert await messages_of(returned) == [
        text("user", "I see an error"),
        text("assistant", "What have you tried?"),
    ]


async def test_a_dict_is_a_message_and_its_content_may_be_a_helper() -> None:
    returned = {"role": "assistant", "content": Image(data=b"img", format="png")}
    assert await messages_of(returned) == [{"role": "assistant", "content": PNG}]


async def test_an_official_prompt_message_is_a_message() -> None:
    returned = mcp_types.PromptMessage(role="assistant", content=mcp_types.TextContent(text="ok"))
    assert await messages_of(returned) == [text("assistant", "ok")]


class Slide(BaseModel):
    title: str


async def test_any_other_value_is_a_user_message_of_its_json() -> None:
    assert await messages_of(Slide(title="Intro")) == [text("user", '{\n  "title": "Intro"\n}')]
    assert await messages_of(42) == [text("user", "42")]


class Deck:
    """A class pydantic has no schema for."""


async def test_a_prompt_return_annotation_needs_no_schema() -> None:
    mcp = MCPServer("Prompts", keys=[KEY])

    @mcp.prompt()
    def deck(topic: str) -> list[Deck]:
        raise NotImplementedError

    [listed] = await mcp.list_prompts()
    assert listed.to_wire()["arguments"] == [{"name": "topic", "required": True}]


def review(
    code: Annotated[str, Field(description="The code to review.")], language: str = "python"
) -> str:
    """Review a piece of code."""
    return f"Review this {language} code:\n\n{code}"


async def test_from_function_makes_the_prompt_the_decorator_would() -> None:
    mcp = MCPServer("Prompts", keys=[KEY])
    prompt = Prompt.from_function(review, name="review_code", title="Code review")

    assert mcp.add_prompt(prompt) is prompt
    assert [listed.to_wire() for listed in await mcp.list_prompts()] == [
        {
            "name": "review_code",
            "title": "Code review",
            "description": "Review a piece of code.",
            "arguments": [
                {"name": "code", "required": True, "description": "The code to review."},
                {"name": "language", "required": False},
            ],
        }
    ]
    async with Client(mcp) as client:
        result = await client.get_prompt("review_code", {"code": "x = 1"})
    assert result.raw["messages"] == [text("user", "Review this python code:\n\nx = 1")]


def test_add_prompt_takes_a_prompt_alone() -> None:
    mcp = MCPServer("Prompts", keys=[KEY])
    with pytest.raises(TypeError, match="Prompt alone"):
        mcp.add_prompt(Prompt.from_function(review), name="other")


def test_context_kwarg_must_name_the_context_parameter() -> None:
    with pytest.raises(TypeError, match="annotated Context"):
        Prompt.from_function(review, context_kwarg="code")


async def test_render_runs_the_prompt_in_process() -> None:
    prompt = Prompt.from_function(review)
    assert await prompt.render({"code": "x = 1", "language": "rust"}) == [
        UserMessage("Review this rust code:\n\nx = 1")
    ]


async def test_render_runs_a_plain_def_in_a_worker_thread() -> None:
    threads: list[int] = []

    def where() -> str:
        threads.append(threading.get_ident())
        return "hello"

    assert await Prompt.from_function(where).render() == [UserMessage("hello")]
    assert threads != [threading.get_ident()]


async def test_render_keeps_each_role() -> None:
    def chat() -> list[Message]:
        return [UserMessage("Hi"), AssistantMessage("Hello")]

    rendered = await Prompt.from_function(chat).render()
    assert [type(m) for m in rendered] == [UserMessage, AssistantMessage]


def ask_slide() -> Elicit[Slide]:
    return Elicit("Which slide?", Slide)


def present(slide: Annotated[Slide, Resolve(ask_slide)]) -> str:
    return slide.title


async def test_render_raises_value_error_for_what_a_client_would_get_as_an_error(
    tmp_path: Path,
) -> None:
    def missing_file() -> Image:
        return Image(path=tmp_path / "missing.png")

    with pytest.raises(ValueError, match="code"):
        await Prompt.from_function(review).render({})
    with pytest.raises(ValueError, match="missing_file") as unreadable:
        await Prompt.from_function(missing_file).render()
    assert isinstance(unreadable.value.__cause__, FileNotFoundError)
    with pytest.raises(ValueError, match="only a client"):
        await Prompt.from_function(present).render()


async def test_render_hands_back_the_input_requests_a_prompt_returns() -> None:
    asked = InputRequiredResult(
        input_requests={
            "tone": ElicitRequest(
                params=ElicitRequestFormParams(
                    message="Which tone?",
                    requested_schema={"type": "object", "properties": {"tone": {"type": "string"}}},
                )
            )
        }
    )

    def toned() -> str | InputRequiredResult:
        return asked

    assert await Prompt.from_function(toned).render() is asked


async def test_missing_prompt_arguments_are_named_together() -> None:
    def brief(topic: str, audience: str, words: int = 100) -> str:
        return f"{topic} for {audience} in {words} words"

    with pytest.raises(ValueError) as missing:
        await Prompt.from_function(brief).render({"words": "many"})
    assert str(missing.value) == (
        "Invalid arguments for prompt brief: Missing required arguments: topic, audience; "
        "words: Input should be a valid integer, unable to parse string as an integer"
    )
