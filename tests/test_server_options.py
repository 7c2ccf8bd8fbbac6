"""What ``MCPServer(...)`` and its decorators take as keyword options: each option is declared
once (a ``TypedDict``), documented, defaulted, and a misspelled one is refused by name."""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from engine import Context, MCPServer
from engine.settings import SERVER_OPTIONS, Settings
from engine.testing import Client
from tests.conftest import KEY

pytestmark = pytest.mark.anyio


def test_a_misspelled_server_option_is_refused_by_name() -> None:
    expected = "MCPServer.__init__() got an unexpected keyword argument 'stat_ttl'"
    with pytest.raises(TypeError, match=re.escape(expected)):
        MCPServer("Bookshop", keys=[KEY], stat_ttl=5)  # type: ignore[call-arg]


def test_a_misspelled_registration_option_is_refused_by_name() -> None:
    mcp = MCPServer("Bookshop", keys=[KEY])
    message = "{}() got an unexpected keyword argument 'titel'"
    with pytest.raises(TypeError, match=re.escape(message.format("MCPServer.tool"))):
        mcp.tool(titel="x")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=re.escape(message.format("MCPServer.prompt"))):
        mcp.prompt(titel="x")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=re.escape(message.format("MCPServer.resource"))):
        mcp.resource("x://y", titel="x")  # type: ignore[call-arg]


def test_a_decorator_written_without_its_call_says_how_to_write_it() -> None:
    mcp = MCPServer("Bookshop", keys=[KEY])
    for decorator, call in [(mcp.tool, "tool()"), (mcp.prompt, "prompt()")]:
        with pytest.raises(TypeError, match=re.escape(f"Use @{call} instead of @")):
            decorator(lambda: "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="The @resource decorator was used incorrectly"):
        mcp.resource(lambda: "x")  # type: ignore[arg-type]


@dataclass
class Shelf:
    books: list[str]


async def test_a_server_is_generic_in_what_its_lifespan_yields() -> None:
    @contextlib.asynccontextmanager
    async def lifespan(server: MCPServer[Shelf]) -> AsyncIterator[Shelf]:
        yield Shelf(["Dune"])

    mcp: MCPServer[Shelf] = MCPServer("Bookshop", keys=[KEY], lifespan=lifespan)

    @mcp.tool()
    def first_book(ctx: Context[Shelf]) -> str:
        return ctx.request_context.lifespan_context.books[0]

    async with Client(mcp) as client:
        assert (await client.call_tool("first_book")).text == "Dune"


def test_dependencies_are_kept_as_given() -> None:
    mcp = MCPServer("Bookshop", keys=[KEY], dependencies=["pandas", "numpy"])
    assert mcp.dependencies == mcp.settings.dependencies == ["pandas", "numpy"]
    assert MCPServer("Bookshop", keys=[KEY]).dependencies == []


def test_one_dependency_given_as_a_string_is_refused_not_split_into_letters() -> None:
    with pytest.raises(ValueError, match=r"dependencies takes a list of package names"):
        MCPServer("Bookshop", keys=[KEY], dependencies="pandas")


def test_every_server_option_is_documented_on_mcp_server() -> None:
    doc = MCPServer.__doc__ or ""
    undocumented = [
        option
        for option in sorted(SERVER_OPTIONS | {"version", "principal", "lifespan"})
        if f"``{option}``" not in doc
    ]
    assert undocumented == []


def test_options_not_given_take_their_defaults() -> None:
    settings = Settings.build(name="Bookshop", environ={})
    assert settings.keys is None
    assert settings.list_ttl_ms == 0
    assert settings.replica_id.startswith("pid-")
    tokens = settings.tokens
    assert (tokens.audience, tokens.state_ttl, tokens.max_token_chars) == ("Bookshop", 600, 65536)
    assert tokens.max_inline_state == 65536 * 3 // 4 - 256
    assert tokens.trust_unsolicited_answers is False
    store = settings.store
    assert (store.store, store.spill_threshold, store.duplicate_wait, store.claim_lease) == (
        None,
        4096,
        2.0,
        10.0,
    )
    journal = settings.journal
    assert (journal.arguments, journal.ttl, journal.sample) == (True, 24 * 3600, 1.0)
    assert journal.max_event_bytes == 64 * 1024
    assert journal.max_bytes == 256 * 1024 * 1024
    assert (settings.legacy.session_ttl, settings.legacy.answer_timeout) == (3600, 300)
    legacy = settings.legacy
    assert (legacy.max_pending_calls_per_session, legacy.max_pending_calls) == (16, 1000)
    assert (legacy.max_pending_calls_per_principal, legacy.max_sessions_per_principal) == (100, 100)
    assert tokens.max_input_responses == 64
    tasks = settings.tasks
    assert (tasks.max_per_principal, tasks.max_per_replica) == (1000, 20_000)
    assert (tasks.max_creations_per_minute, tasks.max_listen_ids) == (600, 256)
    assert tasks.max_result_bytes == 4 * 1024 * 1024


@pytest.mark.parametrize(
    "option",
    [
        "max_pending_calls_per_principal",
        "max_sessions_per_principal",
        "max_input_responses",
        "max_tasks_per_principal",
        "max_tasks_per_replica",
        "max_task_creations_per_minute",
        "max_listen_task_ids",
    ],
)
@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "16"])
def test_a_budget_that_admits_nothing_is_refused(option: str, bad: object) -> None:
    with pytest.raises(ValueError, match=f"{option} must be a whole number, at least 1"):
        Settings.build(name="Bookshop", environ={}, **{option: bad})  # type: ignore[misc]


def test_the_task_result_cap_reads_the_environment_and_is_checked() -> None:
    from_env = Settings.build(name="Bookshop", environ={"ENGINE_MAX_TASK_RESULT_BYTES": "65536"})
    assert from_env.tasks.max_result_bytes == 65536
    given = Settings.build(
        name="Bookshop",
        environ={"ENGINE_MAX_TASK_RESULT_BYTES": "65536"},
        max_task_result_bytes=2048,
    )
    assert given.tasks.max_result_bytes == 2048
    with pytest.raises(
        ValueError,
        match=r"max_task_result_bytes must be a whole number of bytes, at least 1024, got 100",
    ):
        Settings.build(name="Bookshop", environ={}, max_task_result_bytes=100)


@pytest.mark.parametrize("option", ["max_pending_calls_per_session", "max_pending_calls"])
@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "16"])
def test_a_pending_call_bound_that_admits_no_call_is_refused(option: str, bad: object) -> None:
    with pytest.raises(ValueError, match=f"{option} must be a whole number, at least 1"):
        Settings.build(name="Bookshop", environ={}, **{option: bad})  # type: ignore[misc]


def test_options_given_win_over_the_environment_which_wins_over_the_defaults() -> None:
    environ = {
        "ENGINE_STORE": "memory://",
        "ENGINE_REPLICA_ID": "replica-env",
        "ENGINE_JOURNAL_ARGUMENTS": "1",
        "ENGINE_JOURNAL_SAMPLE": "0.5",
    }
    from_env = Settings.build(name="Bookshop", environ=environ)
    assert from_env.store.store == "memory://"
    assert from_env.replica_id == "replica-env"
    assert (from_env.journal.arguments, from_env.journal.sample) == (True, 0.5)
    given = Settings.build(
        name="Bookshop",
        environ=environ,
        store="sqlite:///calls.db",
        replica_id="replica-code",
        journal_arguments=False,
        journal_sample=0.25,
        max_token_chars=4000,
        audience="shop",
    )
    assert given.store.store == "sqlite:///calls.db"
    assert given.replica_id == "replica-code"
    assert (given.journal.arguments, given.journal.sample) == (False, 0.25)
    assert (given.tokens.audience, given.tokens.max_inline_state) == ("shop", 4000 * 3 // 4 - 256)


@pytest.mark.parametrize("none", ["none", "NONE", " ", ""])
def test_engine_store_none_means_no_store_as_serve_takes_it(none: str) -> None:
    assert Settings.build(name="Bookshop", environ={"ENGINE_STORE": none}).store.store is None


async def test_a_handler_name_may_be_given_by_position_or_by_keyword() -> None:
    mcp = MCPServer("Bookshop", keys=[KEY])

    @mcp.tool("by_position", title="By position")
    def first() -> str:
        return "first"

    @mcp.tool(name="by_keyword")
    def second() -> str:
        return "second"

    @mcp.prompt("greeting")
    def greet() -> str:
        return "hello"

    @mcp.resource("books://{title}", name="book", mime_type="text/plain")
    def book(title: str) -> str:
        return title

    async with Client(mcp) as client:
        tools = {tool["name"]: tool for tool in await client.list_tools()}
        assert tools["by_position"]["title"] == "By position"
        assert (await client.call_tool("by_keyword", {})).text == "second"
    assert list(mcp.prompts) == ["greeting"]
    [template] = mcp.resource_templates.values()
    assert (template.name, template.mime_type) == ("book", "text/plain")


def test_connection_limits_come_from_options_then_the_environment_and_are_checked() -> None:
    limits = Settings.build(name="B", environ={}).serve.connections
    assert (limits.max_head_bytes, limits.head_timeout, limits.body_timeout) == (65536, 10, 30)
    assert (limits.min_body_rate, limits.max_connections) == (1024, None)
    env = {"ENGINE_MAX_CONNECTIONS": "500", "ENGINE_HEAD_TIMEOUT": "2.5"}
    limits = Settings.build(name="B", environ=env, max_connections=9).serve.connections
    assert (limits.max_connections, limits.head_timeout) == (9, 2.5)
    with pytest.raises(
        ValueError,
        match=r"ENGINE_MAX_HEAD_BYTES must be a whole number of bytes, at least 1024, got '64k'",
    ):
        Settings.build(name="B", environ={"ENGINE_MAX_HEAD_BYTES": "64k"})
    with pytest.raises(
        ValueError, match=r"max_connections must be a whole number, at least 1, got 0"
    ):
        Settings.build(name="B", environ={}, max_connections=0)
    with pytest.raises(
        ValueError, match=r"max_head_bytes must be a whole number of bytes, at least 1024, got 100"
    ):
        Settings.build(name="B", environ={}, max_head_bytes=100)


def test_log_level_sets_up_logging_unless_the_program_did() -> None:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers = []
    try:
        MCPServer("Bookshop", keys=[KEY], log_level="DEBUG")
        assert (root.level, len(root.handlers)) == (logging.DEBUG, 1)
        root.setLevel(logging.WARNING)
        MCPServer("Bookshop", keys=[KEY], log_level="ERROR")  # configured already: kept
        assert (root.level, len(root.handlers)) == (logging.WARNING, 1)
    finally:
        root.handlers, root.level = handlers, level
    with pytest.raises(ValueError, match="log_level must be one of DEBUG, INFO"):
        MCPServer("Bookshop", keys=[KEY], log_level="LOUD")


async def test_results_name_the_replica_and_the_call_only_when_asked() -> None:
    plain = MCPServer("Bookshop", keys=[KEY], replica_id="r1")
    stamped = MCPServer("Bookshop", keys=[KEY], replica_id="r1", stamp_results=True)
    for mcp in (plain, stamped):

        @mcp.tool()
        def ping() -> str:
            return "pong"

    async with Client(plain) as client:
        quiet = (await client.call_tool("ping")).raw["_meta"]
    async with Client(stamped) as client:
        named = (await client.call_tool("ping")).raw["_meta"]
    assert set(quiet) == {"io.modelcontextprotocol/serverInfo"}
    assert named["engine/replica"] == "r1"
    assert len(named["engine/call"]) > 16
