"""``x-mcp-header`` annotations are checked when a tool is registered: a 2026-07-28 client
leaves out a tool whose annotations break the rules, so such a tool is refused, by name."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import Field

from engine import InvalidSignature, MCPServer
from tests.conftest import KEY


def header(name: object) -> object:
    return Field(json_schema_extra={"x-mcp-header": name})  # type: ignore[dict-item]


def fetch(
    region: Annotated[str, header("Region")],
    shard: Annotated[int, header("Shard")],
    dry_run: Annotated[bool, header("Dry-Run")] = False,
) -> str:
    return region


def ratio(value: Annotated[float, header("Ratio")]) -> str:
    return str(value)


def optional(region: Annotated[str | None, header("Region")] = None) -> str:
    return str(region)


def spaced(region: Annotated[str, header("Region Name")]) -> str:
    return region


def twice(a: Annotated[str, header("Region")], b: Annotated[str, header("region")]) -> str:
    return a + b


def test_string_integer_and_boolean_parameters_may_be_headers() -> None:
    mcp = MCPServer("Shards", keys=[KEY])
    tool = mcp.add_tool(fetch)
    assert tool.param_headers == {"region": "Region", "shard": "Shard", "dry_run": "Dry-Run"}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("fn", "reason"),
    [
        (ratio, "property 'value': x-mcp-header is only permitted on integer/string/boolean"),
        (optional, "(the type keyword is NoneType, not a string)"),
        (spaced, "property 'region': x-mcp-header 'Region Name' is not an RFC 9110 token"),
        (twice, "is the header of property 'a' too"),
    ],
)
async def test_a_tool_whose_headers_break_the_rules_is_refused(fn: object, reason: str) -> None:
    mcp = MCPServer("Shards", keys=[KEY])
    with pytest.raises(InvalidSignature) as refused:
        mcp.add_tool(fn)  # type: ignore[arg-type]
    message = str(refused.value)
    assert message.startswith(f"Tool {fn.__name__!r} has an invalid x-mcp-header annotation: ")  # type: ignore[attr-defined]
    assert reason in message
    assert await mcp.list_tools() == []


def test_a_header_off_the_properties_path_is_refused() -> None:
    mcp = MCPServer("Shards", keys=[KEY])
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string", "x-mcp-header": "Tag"}}
        },
    }
    with pytest.raises(InvalidSignature, match="reached from the root through `properties`"):
        mcp.add_tool(lambda tags: "", name="tagged", input_schema=schema)
