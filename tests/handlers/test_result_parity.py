"""What a tool's return value becomes on the wire, value by value, as the official server sends it.

Clients check ``structuredContent`` against the tool's ``outputSchema``: a tool whose schema
wraps its value in ``result`` must send ``{"result": ...}`` for every value, empty ones included.
The official ``mcp`` server is the reference here (a dev-only dependency).
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp.server import MCPServer as OfficialServer
from pydantic import BaseModel

from engine import MCPServer
from engine.testing import Client
from tests.conftest import KEY

pytestmark = pytest.mark.anyio


class Author(BaseModel):
    name: str


class Book(BaseModel):
    title: str
    author: Author
    tags: list[str] = []


CASES: list[tuple[str, Any, Any]] = [
    ("empty_list", list[str], []),
    ("list", list[str], ["a", "b"]),
    ("empty_tuple", tuple[int, ...], ()),
    ("tuple", tuple[int, str], (1, "a")),
    ("empty_dict", dict[str, int], {}),
    ("dict", dict[str, int], {"a": 1}),
    ("empty_str", str, ""),
    ("none", None, None),
    ("optional_none", int | None, None),
    ("zero", int, 0),
    ("false", bool, False),
    ("zero_float", float, 0.0),
    ("model", Book, Book(title="Dune", author=Author(name="Herbert"))),
    ("empty_model_list", list[Book], []),
    ("model_list", list[Book], [Book(title="Dune", author=Author(name="Herbert"))]),
]


def tool_returning(annotation: Any, value: Any) -> Any:
    def tool() -> Any:
        return value

    tool.__annotations__ = {"return": annotation}
    return tool


def wire(result: dict[str, Any]) -> dict[str, Any]:
    """The parts of a CallToolResult both servers must agree on."""
    return {
        "content": result.get("content"),
        "structuredContent": result.get("structuredContent"),
        "isError": result.get("isError", False),
    }


@pytest.mark.parametrize(("name", "annotation", "value"), CASES, ids=[c[0] for c in CASES])
async def test_a_return_value_goes_on_the_wire_as_the_official_server_sends_it(
    name: str, annotation: Any, value: Any
) -> None:
    official = OfficialServer("reference")
    official.add_tool(tool_returning(annotation, value), name=name)
    expected = (await official.call_tool(name, {})).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )

    ours = MCPServer("ours", keys=[KEY])
    ours.add_tool(tool_returning(annotation, value), name=name)
    [listed] = await ours.list_tools()
    async with Client(ours) as client:
        got = (await client.call_tool(name)).rounds[-1]

    assert wire(got) == wire(expected)
    schema = listed.output_schema
    if schema is not None and schema.get("required") == ["result"]:
        assert "result" in got["structuredContent"]
