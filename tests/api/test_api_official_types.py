"""Objects of the official SDK's ``mcp_types`` (or dicts of their wire form) are taken wherever
a server takes one of ``engine.types``, and a result here equals the official one of that form."""

from __future__ import annotations

from typing import Annotated

import mcp_types
import pytest

from engine import ListRoots, MCPServer, Resolve, Sample
from engine.testing import Client
from engine.types import CallToolResult, SamplingMessage, TextContent, ToolAnnotations
from tests.conftest import KEY

pytestmark = pytest.mark.anyio


def test_a_dict_or_an_official_model_becomes_ours() -> None:
    official = mcp_types.ToolAnnotations(read_only_hint=True)
    for given in ({"readOnlyHint": True}, {"read_only_hint": True}, official):
        assert ToolAnnotations.of(given) == ToolAnnotations(read_only_hint=True)


def test_a_value_of_another_shape_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="role"):
        SamplingMessage.of({"content": {"type": "text", "text": "hi"}})
    with pytest.raises(TypeError, match="SamplingMessage"):
        SamplingMessage.of("hi")


def test_a_result_equals_the_official_result_of_the_same_wire_form() -> None:
    ours = CallToolResult(content=[TextContent(text="done")])
    official = mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="done")])
    assert ours == official
    assert ours != mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="x")])


async def ask(topic: str) -> Sample:
    message = mcp_types.SamplingMessage(
        role="user", content=mcp_types.TextContent(type="text", text=f"About {topic}?")
    )
    return Sample([message], max_tokens=50)


async def test_tool_annotations_and_a_sampling_question_from_official_types() -> None:
    mcp = MCPServer("Ported", keys=[KEY])

    @mcp.tool(annotations={"readOnlyHint": True})
    async def summarise(
        topic: str, answer: Annotated[mcp_types.CreateMessageResult, Resolve(ask)]
    ) -> str:
        return answer.content.text if answer.content.type == "text" else ""

    questions: list[dict[str, object]] = []

    def sampler(params: dict[str, object]) -> dict[str, object]:
        questions.append(params)
        return {"role": "assistant", "content": {"type": "text", "text": "Dunes."}, "model": "m"}

    async with Client(mcp, sampling=sampler) as client:
        (tool,) = await client.list_tools()
        result = await client.call_tool("summarise", {"topic": "Arrakis"})

    assert tool["annotations"] == {"readOnlyHint": True}
    assert questions[0]["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "About Arrakis?"}}
    ]
    assert result.text == "Dunes."


async def where() -> ListRoots:
    return ListRoots()


async def test_an_answer_reaches_a_parameter_annotated_official_as_the_official_model() -> None:
    mcp = MCPServer("Ported", keys=[KEY])

    @mcp.tool()
    async def survey(
        topic: str,
        answer: Annotated[mcp_types.CreateMessageResult, Resolve(ask)],
        roots: Annotated[mcp_types.ListRootsResult, Resolve(where)],
    ) -> str:
        assert isinstance(answer, mcp_types.CreateMessageResult)
        assert isinstance(answer.content, mcp_types.TextContent)
        assert isinstance(roots, mcp_types.ListRootsResult)
        return f"{answer.content.text} in {roots.roots[0].name}"

    async with Client(
        mcp,
        sampling=lambda p: {
            "role": "assistant",
            "content": {"type": "text", "text": "Dunes"},
            "model": "m",
        },
        roots=lambda p: {"roots": [{"uri": "file:///arrakis", "name": "Arrakis"}]},
    ) as client:
        result = await client.call_tool("survey", {"topic": "sand"})
    assert result.text == "Dunes in Arrakis"
