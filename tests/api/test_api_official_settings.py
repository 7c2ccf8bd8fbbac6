"""``mcp.settings`` as the official server has it (``debug``, ``log_level``, the
``warn_on_duplicate_*`` switches, ``dependencies``, ``lifespan``, ``auth``): read the same, set
where the official server lets code set them, and ``MCPServer(tools=[...])``."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine import AuthSettings, Context, MCPServer, Tool
from engine.testing import Client
from tests.conftest import KEY

pytestmark = pytest.mark.anyio


class Verifier:
    async def verify_token(self, token: str) -> None:
        return None


@contextlib.asynccontextmanager
async def shelf(server: MCPServer) -> AsyncIterator[dict[str, str]]:
    yield {"shelf": "first"}


@contextlib.asynccontextmanager
async def other_shelf(server: MCPServer) -> AsyncIterator[dict[str, str]]:
    yield {"shelf": "second"}


def first() -> str:
    return "first"


def second() -> str:
    return "second"


def registry_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "engine.registry"]


# --- reading -------------------------------------------------------------------------------------


def test_settings_hold_what_the_constructor_was_given() -> None:
    auth = AuthSettings(issuer_url="https://auth.example.com/", resource_server_url=None)
    mcp = MCPServer(
        "Bookshop",
        keys=[KEY],
        debug=True,
        log_level="warning",
        warn_on_duplicate_tools=False,
        warn_on_duplicate_prompts=False,
        warn_on_duplicate_resources=False,
        dependencies=["pandas"],
        lifespan=shelf,
        auth=auth,
        token_verifier=Verifier(),
    )
    settings = mcp.settings
    assert (settings.debug, settings.log_level) == (True, "WARNING")
    assert (
        settings.warn_on_duplicate_tools,
        settings.warn_on_duplicate_prompts,
        settings.warn_on_duplicate_resources,
    ) == (False, False, False)
    assert settings.dependencies == ["pandas"]
    assert settings.lifespan is shelf
    assert settings.auth is not None
    assert settings.auth.issuer_url == "https://auth.example.com/"


def test_settings_not_given_read_the_official_defaults() -> None:
    settings = MCPServer("Bookshop", keys=[KEY]).settings
    assert (settings.debug, settings.log_level) == (False, "INFO")
    assert (
        settings.warn_on_duplicate_tools,
        settings.warn_on_duplicate_prompts,
        settings.warn_on_duplicate_resources,
    ) == (True, True, True)
    assert (settings.dependencies, settings.lifespan, settings.auth) == ([], None, None)


# --- setting -------------------------------------------------------------------------------------


def test_debug_set_after_the_server_is_made_reaches_the_http_app() -> None:
    mcp = MCPServer("Bookshop", keys=[KEY])
    mcp.settings.debug = True
    assert mcp.streamable_http_app().debug is True


def test_log_level_set_after_the_server_is_made_reaches_uvicorn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    served: dict[str, Any] = {}

    def serve_app(app: Any, **serving: Any) -> None:
        served.update(serving)

    monkeypatch.setattr("engine.transports.serving.serve_app", serve_app)
    mcp = MCPServer("Bookshop", keys=[KEY])
    mcp.run("streamable-http")
    assert "log_level" not in served["uvicorn_options"]  # not given: uvicorn's own
    mcp.settings.log_level = "warning"
    mcp.run("streamable-http")
    assert served["uvicorn_options"]["log_level"] == "warning"


def test_a_duplicate_switch_set_later_holds_for_later_registrations(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mcp = MCPServer("Bookshop", keys=[KEY])
    with caplog.at_level(logging.WARNING, logger="engine.registry"):
        mcp.add_tool(first, name="greet")
        mcp.add_tool(second, name="greet")
        mcp.settings.warn_on_duplicate_tools = False
        mcp.add_tool(second, name="greet")
        mcp.add_prompt(first, name="hello")
        mcp.add_prompt(second, name="hello")
        mcp.settings.warn_on_duplicate_resources = False
        mcp.add_resource(first, "notes://today")
        mcp.add_resource(second, "notes://today")
    assert registry_warnings(caplog) == [
        "Tool already exists: greet",
        "Prompt already exists: hello",
    ]
    assert mcp.tools["greet"].fn is first


async def test_lifespan_set_after_the_server_is_made_changes_nothing_as_there() -> None:
    """The official server reads ``settings.lifespan`` once, when it is made (its migration
    guide says so), and so does this one."""
    mcp = MCPServer("Bookshop", keys=[KEY], lifespan=shelf)

    @mcp.tool()
    def which(ctx: Context) -> str:
        return str(ctx.request_context.lifespan_context["shelf"])

    mcp.settings.lifespan = other_shelf
    assert mcp.settings.lifespan is other_shelf
    async with Client(mcp) as client:
        assert (await client.call_tool("which")).text == "first"


def test_a_setting_given_a_value_of_another_type_is_refused() -> None:
    settings = MCPServer("Bookshop", keys=[KEY]).settings
    with pytest.raises(ValueError, match="debug must be True or False, got 'yes'"):
        settings.debug = "yes"  # type: ignore[assignment]
    with pytest.raises(ValueError, match="log_level must be one of DEBUG, INFO"):
        settings.log_level = "LOUD"  # type: ignore[assignment]
    with pytest.raises(ValueError, match="warn_on_duplicate_tools must be True or False"):
        settings.warn_on_duplicate_tools = "no"  # type: ignore[assignment]
    assert (settings.debug, settings.log_level, settings.warn_on_duplicate_tools) == (
        False,
        "INFO",
        True,
    )


def test_auth_and_this_servers_own_settings_are_fixed_once_the_server_is_made() -> None:
    auth = AuthSettings(issuer_url="https://auth.example.com/", resource_server_url=None)
    mcp = MCPServer("Bookshop", keys=[KEY], auth=auth, token_verifier=Verifier())
    with pytest.raises(ValueError, match=r"settings.auth is fixed once the server is made"):
        mcp.settings.auth = None
    with pytest.raises(ValueError, match=r"settings.replica_id is fixed"):
        mcp.settings.replica_id = "other"
    assert mcp.settings.auth is not None


def test_a_field_the_settings_do_not_have_is_refused_as_there() -> None:
    """The official migration guide's example: ``port`` went to ``run()``."""
    with pytest.raises(ValueError, match='"Settings" object has no field "port"'):
        MCPServer("Bookshop", keys=[KEY]).settings.port = 9000


# --- tools=[...] ---------------------------------------------------------------------------------


async def test_tools_made_with_from_function_are_served() -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    mcp = MCPServer("Calculator", keys=[KEY], tools=[Tool.from_function(add, title="Addition")])
    async with Client(mcp) as client:
        [listed] = await client.list_tools()
        assert (listed["name"], listed["title"], listed["description"]) == (
            "add",
            "Addition",
            "Add two numbers.",
        )
        assert (await client.call_tool("add", {"a": 2, "b": 3})).text == "5"


async def test_a_later_tool_of_the_list_replaces_an_earlier_one_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """As the official server's tool manager takes its list (``add_tool`` keeps the first)."""
    tools = [Tool.from_function(first, name="greet"), Tool.from_function(second, name="greet")]
    with caplog.at_level(logging.WARNING, logger="engine.registry"):
        loud = MCPServer("Shop", keys=[KEY], tools=tools)
        quiet = MCPServer("Shop", keys=[KEY], tools=tools, warn_on_duplicate_tools=False)
    assert registry_warnings(caplog) == ["Tool already exists: greet"]
    for mcp in (loud, quiet):
        async with Client(mcp) as client:
            assert (await client.call_tool("greet")).text == "second"


def test_tools_takes_tool_records_only() -> None:
    with pytest.raises(TypeError, match=r"tools takes Tool records.*Tool.from_function"):
        MCPServer("Shop", keys=[KEY], tools=[first])  # type: ignore[list-item]


def test_from_function_checks_the_context_parameter_it_is_told() -> None:
    def lookup(title: str, ctx: Context) -> str:
        return title

    assert Tool.from_function(lookup, context_kwarg="ctx").name == "lookup"
    with pytest.raises(TypeError, match=r"context_kwarg='title': tool 'lookup' has no parameter"):
        Tool.from_function(lookup, context_kwarg="title")


async def test_a_resource_template_registered_again_replaces_the_first_silently(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """As the official server's resource manager keeps its templates."""
    mcp = MCPServer("Notes", keys=[KEY])

    def day_notes(day: str) -> str:
        return f"notes of {day}"

    def other_day_notes(day: str) -> str:
        return f"other notes of {day}"

    with caplog.at_level(logging.WARNING, logger="engine.registry"):
        mcp.add_resource(day_notes, "notes://{day}")
        mcp.add_resource(other_day_notes, "notes://{day}")
    assert registry_warnings(caplog) == []
    async with Client(mcp) as client:
        [contents] = (await client.read_resource("notes://monday")).raw["contents"]
    assert contents["text"] == "other notes of monday"
