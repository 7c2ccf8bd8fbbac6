"""A name (or URI) names one handler: a second function under it is refused at registration."""

from __future__ import annotations

import logging

import pytest

from engine import MCPServer
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


def test_a_second_tool_under_a_taken_name_is_refused_and_the_first_kept() -> None:
    mcp = MCPServer("Shop", keys=[KEY])
    mcp.add_tool(first, name="greet")
    with pytest.raises(ValueError) as refused:
        mcp.add_tool(second, name="greet")
    assert str(refused.value) == (
        "A tool 'greet' is already registered (by first); register second as a tool with "
        "@mcp.tool(name=...), or remove the first one"
    )
    assert mcp.tools["greet"].fn is first


def test_prompts_and_resources_are_refused_the_same_way() -> None:
    mcp = MCPServer("Shop", keys=[KEY])
    mcp.add_prompt(first, name="hello")
    mcp.add_resource(first, "notes://today")
    mcp.add_resource(day_notes, "notes://{day}")
    with pytest.raises(ValueError, match="A prompt 'hello' is already registered"):
        mcp.add_prompt(second, name="hello")
    with pytest.raises(ValueError, match="A resource 'notes://today' is already registered"):
        mcp.add_resource(second, "notes://today")
    with pytest.raises(ValueError, match=r"A resource 'notes://\{day\}' is already registered"):
        mcp.add_resource(other_day_notes, "notes://{day}")


async def test_adding_the_same_function_again_changes_nothing() -> None:
    """As a tool that enables another does each time it is called (docs/context.md)."""
    mcp = MCPServer("Shop", keys=[KEY])
    registered = mcp.add_tool(first, name="greet")
    assert mcp.add_tool(first, name="greet") is registered
    async with Client(mcp) as client:
        assert (await client.call_tool("greet")).text == "first"


def test_the_official_switches_keep_the_first_with_a_warning_or_without(
    caplog: pytest.LogCaptureFixture,
) -> None:
    warned = MCPServer(
        "Shop",
        keys=[KEY],
        warn_on_duplicate_tools=True,
        warn_on_duplicate_prompts=True,
        warn_on_duplicate_resources=True,
    )
    with caplog.at_level(logging.WARNING, logger="engine.registry"):
        warned.add_tool(first, name="greet")
        warned.add_tool(second, name="greet")
        warned.add_prompt(first, name="hello")
        warned.add_prompt(second, name="hello")
        warned.add_resource(first, "notes://today")
        warned.add_resource(second, "notes://today")
    assert warned.tools["greet"].fn is first
    assert warned.prompts["hello"].fn is first
    assert warned.resources["notes://today"].fn is first
    assert [r.getMessage() for r in caplog.records if r.name == "engine.registry"] == [
        "A tool 'greet' is already registered (by first); second is not registered",
        "A prompt 'hello' is already registered (by first); second is not registered",
        "A resource 'notes://today' is already registered (by first); second is not registered",
    ]

    caplog.clear()
    quiet = MCPServer("Shop", keys=[KEY], warn_on_duplicate_tools=False)
    with caplog.at_level(logging.WARNING, logger="engine.registry"):
        quiet.add_tool(first, name="greet")
        quiet.add_tool(second, name="greet")
    assert quiet.tools["greet"].fn is first
    assert not [r for r in caplog.records if r.name == "engine.registry"]
    with pytest.raises(ValueError, match="A prompt 'hello' is already registered"):
        quiet.add_prompt(first, name="hello")
        quiet.add_prompt(second, name="hello")  # only the tools switch was given
