"""A tool's output schema and result, return annotation by return annotation, as the official
server lists and sends them: TypedDicts, dataclasses, content blocks of ``mcp_types``, the
``Image`` and ``Audio`` helpers, a ``CallToolResult`` the tool builds itself.

The official ``mcp`` server is the reference (a dev-only dependency); each case is built twice,
once with its helpers and once with ours.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

import mcp_types
import pytest
from mcp.server import MCPServer as OfficialServer
from mcp.server import mcpserver as official_helpers
from pydantic import BaseModel, Field

import engine
from engine import InvalidSignature, MCPServer
from engine.testing import Client
from tests.conftest import KEY

pytestmark = pytest.mark.anyio


class Weather(TypedDict):
    temperature: float
    conditions: str


@dataclasses.dataclass
class Station:
    name: str
    online: bool = True


class Reading(BaseModel):
    celsius: float = Field(description="Degrees Celsius.")


class Opaque:
    def __init__(self, label: str) -> None:
        self.label = label

    def __repr__(self) -> str:
        return f"Opaque({self.label!r})"


def png(kit: Any) -> Any:
    return kit.Image(data=b"png", format="png")


DOCUMENT = mcp_types.EmbeddedResource(
    resource=mcp_types.TextResourceContents(uri="report://q3", mime_type="text/markdown", text="#")
)
Case = Callable[[Any], tuple[Any, Any]]
"""Given the helpers (``Image``, ``Audio``) of one side: the return annotation and the value."""

CASES: dict[str, Case] = {
    "typeddict": lambda kit: (Weather, Weather(temperature=16.2, conditions="Overcast")),
    "dataclass": lambda kit: (Station, Station(name="north")),
    "dataclass_from_a_dict": lambda kit: (Station, {"name": "south", "online": False}),
    "model": lambda kit: (Reading, Reading(celsius=3.5)),
    "float_given_an_int": lambda kit: (float, 17),
    "any": lambda kit: (Any, {"a": [1, 2]}),
    "no_annotation_model": lambda kit: (None, Reading(celsius=1.0)),
    "dict_with_int_keys": lambda kit: (dict[int, str], {1: "one"}),
    "optional_int": lambda kit: (int | None, 4),
    "annotated_int": lambda kit: (Annotated[int, Field(ge=0)], 3),
    "official_image_block": lambda kit: (
        mcp_types.ImageContent,
        mcp_types.ImageContent(data="aGk=", mime_type="image/png"),
    ),
    "official_embedded_resource": lambda kit: (mcp_types.EmbeddedResource, DOCUMENT),
    "official_blocks_list": lambda kit: (
        list[mcp_types.ContentBlock],
        [mcp_types.TextContent(text="a"), DOCUMENT],
    ),
    "image": lambda kit: (kit.Image, png(kit)),
    "audio": lambda kit: (kit.Audio, kit.Audio(data=b"wav")),
    "text_and_image": lambda kit: (list[str | kit.Image], ["Sales:", png(kit)]),
    "image_unannotated": lambda kit: (None, png(kit)),
    "class_without_annotations": lambda kit: (Opaque, Opaque("x")),
    "official_call_tool_result": lambda kit: (
        mcp_types.CallToolResult,
        mcp_types.CallToolResult(
            content=[mcp_types.TextContent(text="done")], structured_content={"n": 1}
        ),
    ),
    "annotated_call_tool_result": lambda kit: (
        Annotated[mcp_types.CallToolResult, Reading],
        mcp_types.CallToolResult(content=[], structured_content={"celsius": 2.0}),
    ),
    "block_with_structured_output": lambda kit: (
        mcp_types.ImageContent,
        mcp_types.ImageContent(data="aGk=", mime_type="image/png"),
    ),
}
OPTIONS: dict[str, dict[str, Any]] = {"block_with_structured_output": {"structured_output": True}}


def tool_returning(annotation: Any, value: Any) -> Callable[[], Any]:
    def tool() -> Any:
        return value

    tool.__annotations__ = {} if annotation is None else {"return": annotation}
    return tool


def wire(result: dict[str, Any]) -> dict[str, Any]:
    return {
        "content": result.get("content"),
        "structuredContent": result.get("structuredContent"),
        "isError": result.get("isError", False),
    }


@pytest.mark.parametrize("name", list(CASES))
async def test_the_output_schema_and_result_are_the_official_ones(name: str) -> None:
    official = OfficialServer("reference")
    options = OPTIONS.get(name, {})
    official.add_tool(tool_returning(*CASES[name](official_helpers)), name=name, **options)
    [official_tool] = await official.list_tools()
    expected = (await official.call_tool(name, {})).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )

    ours = MCPServer("ours", keys=[KEY])
    ours.add_tool(tool_returning(*CASES[name](engine)), name=name, **options)
    [listed] = await ours.list_tools()
    async with Client(ours) as client:
        got = (await client.call_tool(name)).rounds[-1]

    assert listed.output_schema == official_tool.output_schema
    assert wire(got) == wire(expected)


async def test_a_value_that_does_not_fit_the_output_schema_fails_the_call() -> None:
    mcp = MCPServer("Weather", keys=[KEY])

    @mcp.tool()
    def reading() -> Reading:
        return {"kelvin": 3}  # type: ignore[return-value]

    async with Client(mcp) as client:
        result = await client.call_tool("reading")
    assert result.is_error
    assert result.structured_content is None


async def test_structured_output_true_refuses_a_type_without_a_schema() -> None:
    mcp = MCPServer("Weather", keys=[KEY])

    def station() -> Opaque:
        return Opaque("x")

    with pytest.raises(InvalidSignature, match="not serializable for structured output"):
        mcp.add_tool(station, structured_output=True)
    with pytest.raises(InvalidSignature, match="needs a return annotation"):
        mcp.add_tool(lambda: 1, name="bare", structured_output=True)
    assert await mcp.list_tools() == []


def test_a_call_tool_result_cannot_be_one_arm_of_a_union() -> None:
    mcp = MCPServer("Reports", keys=[KEY])

    def report() -> mcp_types.CallToolResult | str:
        return "x"

    with pytest.raises(InvalidSignature, match="one arm of a union"):
        mcp.add_tool(report)


class Shelf(TypedDict):
    label: str
    readings: list[Weather]


async def test_typeddicts_inside_generics_have_a_schema_on_every_python() -> None:
    mcp = MCPServer("Weather", keys=[KEY])

    @mcp.tool()
    def week() -> list[Weather]:
        return [Weather(temperature=16.2, conditions="Overcast")]

    @mcp.tool()
    def shelf() -> Shelf:
        return Shelf(label="north", readings=[Weather(temperature=9.0, conditions="Rain")])

    listed = {tool.name: tool.output_schema for tool in await mcp.list_tools()}
    assert listed["week"] is not None
    assert listed["week"]["properties"]["result"]["items"] == {"$ref": "#/$defs/Weather"}
    assert listed["shelf"] is not None
    assert listed["shelf"]["properties"]["readings"]["items"] == {"$ref": "#/$defs/Weather"}
    async with Client(mcp) as client:
        week_result = await client.call_tool("week")
        shelf_result = await client.call_tool("shelf")
    assert week_result.structured_content == {
        "result": [{"temperature": 16.2, "conditions": "Overcast"}]
    }
    assert shelf_result.structured_content == {
        "label": "north",
        "readings": [{"temperature": 9.0, "conditions": "Rain"}],
    }
