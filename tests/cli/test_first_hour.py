"""What a first hour with ``python -m engine`` meets: each rough edge, as a user runs into it."""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_cli import ANSWER_YES, Server, engine, serving
from tests.conftest import KEY

NOTES = """\
from engine import MCPServer

mcp = MCPServer("Notes")


@mcp.tool()
def ping(n: int) -> str:
    return f"pong {n}"
"""
SIGN_UP = """\
from pydantic import BaseModel

from engine import AcceptedElicitation, Context, MCPServer

mcp = MCPServer("Club")


class Email(BaseModel):
    email: str


@mcp.tool()
async def sign_up(name: str, ctx: Context) -> str:
    member = await ctx.once(lambda: 7)
    answer = await ctx.elicit(f"Member {member}: your email?", Email)
    if not isinstance(answer, AcceptedElicitation):
        return "not signed up"
    return f"{name} signed up as {answer.data.email}"
"""
COUNTING = """\
import anyio

from engine import Context, MCPServer

mcp = MCPServer("Counter", task_poll_interval=0.05)


@mcp.tool(task=True)
async def count(to: int, ctx: Context) -> str:
    await anyio.sleep(1.0)  # the client is following the task by now
    for n in range(1, to + 1):
        await ctx.report_progress(n, to, f"counted {n}")
        await anyio.sleep(0.3)
    return f"counted to {to}"
"""
SHELF = """\
from engine import MCPServer

mcp = MCPServer("Shelf")


@mcp.prompt(title="Recommend a book")
def recommend(genre: str) -> str:
    \"\"\"Ask for a recommendation.\"\"\"
    return f"Recommend a {genre} novel."


@mcp.resource("books://catalog", title="The catalog", mime_type="text/plain")
def catalog() -> str:
    return "Dune\\nNeuromancer"


@mcp.tool(title="Ping it", annotations={"readOnlyHint": True})
def ping() -> str:
    return "pong"
"""
EMAIL = '{"action": "accept", "content": {"email": "ada@example.com"}}'


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving("examples/bookshop_server.py", tmp_path_factory.mktemp("shop")) as running:
        yield running


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("files")
    for name, text in {
        "notes.py": NOTES,
        "sign_up.py": SIGN_UP,
        "counting.py": COUNTING,
        "shelf.py": SHELF,
    }.items():
        (directory / name).write_text(text)
    return directory


def ordered(shop: Server) -> str:
    """One order for Neuromancer through the shop; its call id."""
    done = engine(
        "call", shop.url, "order_book", "--arg", "title=Neuromancer", "--answer", ANSWER_YES
    )
    assert done.returncode == 0, done.stderr
    listed = engine("calls", "--store", shop.store, "--json", "--limit", "1")
    call_id: str = json.loads(listed.stdout)[0]["call_id"]
    return call_id


# --- serve ----------------------------------------------------------------------------------------


def test_serve_prints_the_url_a_client_connects_to(shop: Server) -> None:
    log = shop.path.parent / "serve.log"
    deadline = time.monotonic() + 10
    while f"serving MCP on {shop.url}" not in log.read_text():
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)


# --- list and call of a server file ---------------------------------------------------------------


def test_a_server_file_is_listed_and_called_without_a_warning_about_a_store(files: Path) -> None:
    listed = engine("list", str(files / "notes.py"))
    assert listed.returncode == 0, listed.stderr
    assert listed.stderr == ""
    called = engine("call", str(files / "notes.py"), "ping", "--arg", "n=3")
    assert called.returncode == 0, called.stderr
    assert called.stderr == ""
    assert "  result  pong 3" in called.stdout


def test_call_gets_a_prompt_and_reads_a_resource(files: Path) -> None:
    shelf = str(files / "shelf.py")
    prompt = engine("call", shelf, "--prompt", "recommend", "--arg", "genre=sf")
    assert prompt.returncode == 0, prompt.stderr
    assert prompt.stdout.splitlines() == [
        'round 1 → prompts/get recommend {"genre": "sf"}',
        "round 1 ← complete (replica in process)",
        "  description  Ask for a recommendation.",
        "  user       Recommend a sf novel.",
    ]
    resource = engine("call", shelf, "--resource", "books://catalog")
    assert resource.returncode == 0, resource.stderr
    assert resource.stdout.splitlines()[2:] == [
        "  books://catalog [text/plain]",
        "    Dune",
        "    Neuromancer",
    ]
    missing = engine("call", shelf, "--prompt", "summarise")
    assert (missing.returncode, missing.stderr) == (
        2,
        f"error: {shelf} has no prompt 'summarise'; it has: recommend\n",
    )
    both = engine("call", shelf, "ping", "--prompt", "recommend")
    assert both.returncode == 2
    assert "a TOOL name, --prompt NAME or --resource URI (one of them)" in both.stderr


def test_list_shows_titles_and_annotations(files: Path) -> None:
    listed = engine("list", str(files / "shelf.py"))
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[lines.index("  ping — Ping it") + 1] == "    annotations: readOnlyHint=true"
    assert "  recommend — Recommend a book" in lines
    assert "  books://catalog  catalog [text/plain] — The catalog" in lines


def test_an_answer_to_a_question_not_asked_is_an_error_naming_the_keys(files: Path) -> None:
    # The body's first question follows a ctx.once step, which its key counts: elicit#2.
    done = engine(
        "call",
        str(files / "sign_up.py"),
        "sign_up",
        "--arg",
        "name=Ada",
        "--answer",
        f"elicit#1={EMAIL}",
    )
    assert done.returncode == 2, done.stdout
    assert done.stderr == (
        "error: --answer elicit#1: no question with that key; the server asks elicit#2 (the keys "
        "in brackets above): give --answer KEY=JSON with those keys, or leave --answer out to be "
        "asked at the terminal\n"
    )
    assert "[elicit#2] elicitation/create" in done.stdout
    assert "your email" not in done.stdout  # not prompted for

    right = engine(
        "call",
        str(files / "sign_up.py"),
        "sign_up",
        "--arg",
        "name=Ada",
        "--answer",
        f"elicit#2={EMAIL}",
    )
    assert right.returncode == 0, right.stdout + right.stderr
    assert "  result  Ada signed up as ada@example.com" in right.stdout


def test_a_declined_form_is_said_plainly_after_the_error(files: Path) -> None:
    done = engine(
        "call",
        "examples/bookshop_server.py",
        "order_book",
        "--arg",
        "title=Neuromancer",
        stdin="d\n",
    )
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    said = lines.index(
        "  the form was declined, so the tool did not run (the error text is the one MCP "
        "servers send for it, kept as it is)"
    )
    assert "elicitation was decline" in lines[said - 1]  # the wire text stays


# --- the journal commands -------------------------------------------------------------------------


def test_calls_name_the_server_of_each_call_and_filter_by_it(shop: Server, files: Path) -> None:
    shop_call = ordered(shop)
    # Another server writes to the same store (a file run in process takes ENGINE_STORE).
    noted = engine(
        "call",
        str(files / "notes.py"),
        "ping",
        "--arg",
        "n=1",
        ENGINE_STORE=shop.store,
        ENGINE_KEYS=KEY,
    )
    assert noted.returncode == 0, noted.stderr

    table = engine("calls", "--store", shop.store)
    header, *rows = table.stdout.splitlines()
    assert header.split()[:5] == ["CALL", "ID", "SERVER", "TOOL", "ROUNDS"]
    by_id = {row.split()[0]: row.split()[1:3] for row in rows}
    assert by_id[shop_call] == ["Bookshop", "order_book"]
    assert ["Notes", "ping"] in by_id.values()

    notes_only = json.loads(
        engine("calls", "--store", shop.store, "--server", "Notes", "--json").stdout
    )
    assert {row["server"] for row in notes_only} == {"Notes"}
    assert [row["target"] for row in notes_only] == ["ping"]
    nothing = engine("calls", "--store", shop.store, "--server", "Nobody")
    assert nothing.stdout == "No recorded calls matching the filters.\n"


def test_show_takes_a_part_from_the_middle_of_an_id(shop: Server) -> None:
    call_id = ordered(shop)
    shown = engine("show", call_id[12:24], "--store", shop.store, ENGINE_KEYS=KEY)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"Call {call_id}: tools/call order_book")


def test_replay_without_the_app_says_which_server_to_give(shop: Server) -> None:
    call_id = ordered(shop)
    done = engine("replay", call_id, "--store", shop.store, ENGINE_KEYS=KEY)
    assert done.returncode == 2
    assert done.stderr == (
        f"error: give the server code to replay call {call_id} against: --app FILE.py[:ATTR], "
        "the file you serve (as `serve` takes it); the call was served by the server named "
        "'Bookshop'; the journal keeps what the call did, not where its code lives\n"
    )


# --- tasks ----------------------------------------------------------------------------------------


def test_call_shows_the_progress_a_task_reports_and_tasks_lines_up(
    files: Path, tmp_path: Path
) -> None:
    with serving(str(files / "counting.py"), tmp_path) as counter:
        done = engine("call", counter.url, "count", "--arg", "to=3")
        assert done.returncode == 0, done.stdout + done.stderr
        lines = done.stdout.splitlines()
        shown = [line for line in lines if line.startswith("  status: ")]
        assert shown == [
            "  status: counted 1 (1/3)",
            "  status: counted 2 (2/3)",
            "  status: counted 3 (3/3)",
        ], lines
        task_id = lines[2].split()[1].rstrip(":")

        table = engine("tasks", "--store", counter.store)
        header, *rows = table.stdout.splitlines()
        assert header.split()[:4] == ["TASK", "ID", "TOOL", "STATUS"]
        assert [row.split()[:3] for row in rows] == [[task_id, "count", "completed"]]
        # the task no longer shows what its body reported while it worked
        got = json.loads(engine("tasks", "--store", counter.store, "--json").stdout)
        assert got[0]["status"] == "completed"


# --- make fleet -----------------------------------------------------------------------------------


def test_the_fleet_prints_how_the_journal_commands_open_its_calls(
    files: Path, tmp_path: Path
) -> None:
    from deploy.fleet import Fleet

    notes = str(files / "notes.py")
    with Fleet(
        replicas_count=1, redis="private", workdir=tmp_path / "fleet", server=notes
    ) as fleet:
        said = [line.strip() for line in fleet.describe().splitlines()]
        assert f"keys: {fleet.keys_file}  (removed with the fleet)" in said
        called = engine("call", fleet.url, "ping", "--arg", "n=5")
        assert called.returncode == 0, called.stderr

        [listing] = [line for line in said if line.startswith("python -m engine calls ")]
        listed = engine(*shlex.split(listing)[3:], "--json")
        assert listed.returncode == 0, listed.stderr
        [row] = json.loads(listed.stdout)
        assert (row["server"], row["target"]) == ("Notes", "ping")

        [show] = [line for line in said if line.startswith("python -m engine show CALL_ID ")]
        shown = engine(*shlex.split(show.replace("CALL_ID", row["call_id"]))[3:])
        assert shown.returncode == 0, shown.stderr
        assert "result  pong 5" in shown.stdout
