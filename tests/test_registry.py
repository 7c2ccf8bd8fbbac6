"""A name (or URI) names one handler: a second function under it is dropped, with a warning
(a resource template is replaced instead, as the official server does)."""

from __future__ import annotations

import logging

import pytest

from engine import MCPServer, ToolError
from engine.testing import Client
from tests.conftest import KEY

pytestmark = pytest.mark.anyio


def first() -> str:
    return "first"


def second() -> str:
    return "second"


def day_notes(day: str) -> str:
    return day


def other_day_notes(day: str) -> str:
    return day


def test_a_second_function_under_a_taken_name_is_dropped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mcp = MCPServer("Shop", keys=[KEY])
    with caplog.at_level(logging.WARNING, logger="engine.registry"):
        mcp.add_tool(first, name="greet")
        mcp.add_tool(second, name="greet")
        mcp.add_prompt(first, name="hello")
        mcp.add_prompt(second, name="hello")
        mcp.add_resource(first, "notes://today")
        mcp.add_resource(second, "notes://today")
        mcp.add_resource(day_notes, "notes://{day}")
        mcp.add_resource(other_day_notes, "notes://{day}")
    assert mcp.tools["greet"].fn is first
    assert mcp.prompts["hello"].fn is first
    assert mcp.resources["notes://today"].fn is first
    # A template registered again replaces the first, silently, as the official server's do.
    assert mcp.resource_templates["notes://{day}"].fn is other_day_notes
    assert [r.getMessage() for r in caplog.records if r.name == "engine.registry"] == [
        "Tool already exists: greet",
        "Prompt already exists: hello",
        "Resource already exists: notes://today",
    ]


async def test_adding_the_same_function_again_changes_nothing() -> None:
    """As a tool that enables another does each time it is called (docs/context.md)."""
    mcp = MCPServer("Shop", keys=[KEY])
    registered = mcp.add_tool(first, name="greet")
    assert mcp.add_tool(first, name="greet") is registered
    async with Client(mcp) as client:
        assert (await client.call_tool("greet")).text == "first"


def test_the_official_switches_turned_off_drop_the_second_silently(
    caplog: pytest.LogCaptureFixture,
) -> None:
    quiet = MCPServer("Shop", keys=[KEY], warn_on_duplicate_tools=False)
    with caplog.at_level(logging.WARNING, logger="engine.registry"):
        quiet.add_tool(first, name="greet")
        quiet.add_tool(second, name="greet")
        quiet.add_prompt(first, name="hello")
        quiet.add_prompt(second, name="hello")  # only the tools switch was given
    assert quiet.tools["greet"].fn is first
    assert [r.getMessage() for r in caplog.records if r.name == "engine.registry"] == [
        "Prompt already exists: hello"
    ]


def test_removing_an_unknown_tool_or_prompt_says_so() -> None:
    mcp = MCPServer("Shop", keys=[KEY])
    mcp.add_tool(first, name="greet")
    mcp.add_prompt(first, name="hello")
    mcp.remove_tool("greet")
    mcp.remove_prompt("hello")
    assert not mcp.tools and not mcp.prompts
    with pytest.raises(ToolError, match="Unknown tool: greet"):
        mcp.remove_tool("greet")
    with pytest.raises(ValueError, match="Unknown prompt: hello"):
        mcp.remove_prompt("hello")


def test_a_lambda_needs_a_name_to_be_registered() -> None:
    mcp = MCPServer("shop", keys=[KEY])
    for register in (mcp.add_tool, mcp.add_prompt):
        with pytest.raises(ValueError, match="You must provide a name for lambda functions"):
            register(lambda: "hi")
    with pytest.raises(ValueError, match="You must provide a name for lambda functions"):
        mcp.add_resource(lambda: "hi", "shop://greeting")

    mcp.add_tool(lambda: "hi", name="greet")
    assert [tool.name for tool in mcp.core.registry.tools.values()] == ["greet"]
