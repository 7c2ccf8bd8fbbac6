"""``python -m engine``: every subcommand as a user runs it, against a real server and store."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from engine.cli.main import main
from engine.state import claims as engine_claims
from tests.cli.command_line import run_in_process
from tests.conftest import KEY, OTHER_KEY
from tests.fleet_helpers import ROOT, free_port, healthy_until_stopped

YES = '{"action": "accept", "content": {"confirm": true}}'
ANSWER_YES = f"confirm_backorder={YES}"


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return {**env, **extra}


def serve_in_background(
    app: Path, port: int, store: str, log: Path, **env: str
) -> subprocess.Popen[bytes]:
    """``python -m engine serve APP`` on ``port`` and ``store``, its output to ``log``."""
    command = ["serve", str(app), "--port", str(port), "--store", store]
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "engine", *command],
            cwd=ROOT,
            env=environment(ENGINE_KEYS=KEY, **env),
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def engine(*args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m engine ARGS`` from the repository root, run in this process."""
    return run_in_process(list(args), ROOT, stdin, **env)


def engine_process(*args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m engine ARGS`` from the repository root, in an interpreter of its own."""
    return subprocess.run(
        [sys.executable, "-m", "engine", *args],
        cwd=ROOT,
        env=environment(**env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


@dataclass
class Server:
    url: str
    store: str
    path: Path


@contextlib.contextmanager
def serving(app: str, directory: Path) -> Iterator[Server]:
    """``python -m engine serve APP`` with a SQLite store that records arguments."""
    path = directory / "calls.sqlite3"
    store = f"sqlite:///{path}"
    port = free_port()
    log_path = directory / "serve.log"
    serve = ["serve", app, "--port", str(port), "--store", store, "--replica", "cli-test"]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "engine", *serve],
            cwd=ROOT,
            env=environment(ENGINE_KEYS=KEY, ENGINE_JOURNAL_ARGUMENTS="1"),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    with healthy_until_stopped(process, port, log_path):
        yield Server(f"http://127.0.0.1:{port}/mcp", store, path)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The bookshop, served with a SQLite store that records arguments."""
    with serving("examples/bookshop_server.py", tmp_path_factory.mktemp("cli")) as running:
        yield running


JOURNALED_TIMEOUT = 30.0
"""Seconds, generously, until a call left open is in the journal (its round waits a second)."""


def listed_calls(server: Server) -> list[dict[str, Any]]:
    listed = engine("calls", "--store", server.store, "--json")
    assert listed.returncode == 0, listed.stderr
    calls: list[dict[str, Any]] = json.loads(listed.stdout)
    return calls


def newest_call(server: Server) -> str:
    listed = engine("calls", "--store", server.store, "--json")
    assert listed.returncode == 0, listed.stderr
    call_id: str = json.loads(listed.stdout)[0]["call_id"]
    return call_id


@pytest.fixture(scope="module")
def recorded(server: Server) -> str:
    """One order for Neuromancer, answered from the command line; its call id."""
    done = engine(
        "call", server.url, "order_book", "--arg", "title=Neuromancer", "--answer", ANSWER_YES
    )
    assert done.returncode == 0, done.stderr
    return newest_call(server)


def store_contents(path: Path) -> dict[str, list[Any]]:
    """Every row of every table: what "the store is untouched" compares."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        tables = [
            name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        ]
        return {t: sorted(map(repr, conn.execute(f"SELECT * FROM {t}"))) for t in tables}


# --- help and keygen ------------------------------------------------------------------------------

COMMANDS = ["serve", "call", "calls", "tasks", "show", "replay", "export", "inspect", "keygen"]


def test_every_command_answers_help(capsys: pytest.CaptureFixture[str]) -> None:
    overview = engine_process("--help")  # the console script and `python -m engine` share this
    assert overview.returncode == 0
    for name in COMMANDS:
        assert f"    {name}" in overview.stdout
    helps = {}
    for name in COMMANDS:
        with pytest.raises(SystemExit) as exited:
            main([name, "--help"])
        assert exited.value.code == 0
        helps[name] = capsys.readouterr().out
        assert helps[name].startswith(f"usage: python -m engine {name}"), name
    assert "exit status: 0 every round matches, 1 divergence" in helps["replay"]
    assert "--answer KEY=JSON" in helps["call"]


def test_keygen_prints_a_new_secret_each_time() -> None:
    first, second = engine("keygen"), engine("keygen")
    assert first.returncode == second.returncode == 0
    assert len(first.stdout.strip()) == 64 and int(first.stdout, 16) >= 0
    assert first.stdout != second.stdout


# --- call -----------------------------------------------------------------------------------------


def test_a_scripted_call_prints_each_round_and_the_result(server: Server) -> None:
    done = engine(
        "call",
        server.url,
        "order_book",
        "--json",
        '{"title": "Neuromancer"}',
        "--answer",
        ANSWER_YES,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:6] == [
        'round 1 → tools/call order_book {"title": "Neuromancer"}',
        "round 1 ← input_required (replica cli-test): 1 question",
        "[confirm_backorder] elicitation/create",
        f"  answered from --answer: {YES}",
        "round 2 → tools/call order_book answering confirm_backorder",
        "round 2 ← complete (replica cli-test)",
    ]
    assert "Backordered 'Neuromancer'; it ships in 2-3 weeks." in done.stdout


class Terminal:
    """A child process on a pseudo-terminal: read until a prompt appears, type a line."""

    def __init__(self, *args: str) -> None:
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "engine", *args],
            cwd=ROOT,
            env=environment(),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            close_fds=True,
        )
        os.close(slave)
        self.output = ""

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self.master, 4096)
        except OSError:  # the child closed the terminal
            return False
        self.output += chunk.decode(errors="replace")
        return bool(chunk)

    def expect(self, text: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output:
            if time.monotonic() > deadline or not self._read(0.2):
                raise AssertionError(f"never saw {text!r} in:\n{self.output}")

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")

    def finish(self, timeout: float = 20) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._read(0.2):
            if self.process.poll() is not None and not select.select([self.master], [], [], 0)[0]:
                break
        os.close(self.master)
        return self.process.wait(timeout)


def test_an_interactive_call_renders_the_form_as_prompts(server: Server) -> None:
    terminal = Terminal("call", server.url, "order_book", "--arg", "title=Neuromancer")
    terminal.expect("'Neuromancer' is out of stock (2-3 weeks). Order anyway?")
    terminal.expect("[a]ccept and fill in the form, [d]ecline or [c]ancel? [a]: ")
    terminal.type("")  # the default: accept
    terminal.expect("confirm (boolean, required) — Order anyway and wait?")
    terminal.expect("confirm [y/n]: ")
    terminal.type("maybe")
    terminal.expect("answer y or n")
    terminal.type("y")
    assert terminal.finish() == 0, terminal.output
    assert "Backordered 'Neuromancer'; it ships in 2-3 weeks." in terminal.output


def test_declining_from_piped_stdin_ends_with_an_error_result(server: Server) -> None:
    done = engine("call", server.url, "order_book", "--arg", "title=Neuromancer", stdin="d\n")
    assert done.returncode == 1
    assert "[d]ecline or [c]ancel? [a]: d" in done.stdout  # a script's answers are shown
    assert "round 2 ← error (replica cli-test)" in done.stdout.splitlines()
    assert "elicitation was decline" in done.stdout


def test_protocol_problems_exit_2_and_say_what_to_do(server: Server) -> None:
    unknown = engine("call", server.url, "order_a_pizza")
    assert unknown.returncode == 2
    assert "has no tool 'order_a_pizza'; it has: order_book" in unknown.stderr

    wrong_path = engine("call", server.url.removesuffix("/mcp") + "/api", "order_book")
    assert wrong_path.returncode == 2
    assert "HTTP 404" in wrong_path.stderr and "/mcp" in wrong_path.stderr

    no_answers = engine("call", server.url, "order_book", "--arg", "title=Neuromancer", stdin="")
    assert no_answers.returncode == 2
    assert "--answer KEY=JSON" in no_answers.stderr
    # the call stays open: its round 1 waits in the server's journal writer for its end, then is
    # written alone (later tests compare the store before and after, so this one waits for it)
    deadline = time.monotonic() + JOURNALED_TIMEOUT
    while not any(c["last_kind"] == "input_required" for c in listed_calls(server)):
        assert time.monotonic() < deadline, "the unanswered call was never journaled"
        time.sleep(0.1)


READING_APP = """
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from engine import Context, Elicit, MCPServer, Resolve

mcp = MCPServer("Reading")


class Plan(BaseModel):
    format: Literal["paper", "ebook"]
    pages_per_day: int = Field(30, description="How fast you read")
    note: str | None = None


def ask_plan(title: str) -> Elicit[Plan]:
    return Elicit(f"How will you read {title}?", Plan)


@mcp.tool()
async def plan_reading(title: str, plan: Annotated[Plan, Resolve(ask_plan)], ctx: Context) -> str:
    summary = await ctx.sample(f"Summarise {title} in one line", max_tokens=40)
    roots = await ctx.list_roots()
    how = f"{plan.format}, {plan.pages_per_day}/day, note={plan.note}"
    return f"{how}; {summary.content.text}; {roots.roots[0].uri}"


@mcp.tool()
def nearest_shop(city: Annotated[str, Field(json_schema_extra={"x-mcp-header": "City"})]) -> str:
    return f"the shop in {city}"
"""


def test_a_call_answers_forms_sampling_and_roots_and_sends_param_headers(tmp_path: Path) -> None:
    app = tmp_path / "reading_server.py"
    app.write_text(READING_APP)
    with serving(str(app), tmp_path) as reading:
        # format: choice 2 (ebook); pages_per_day: the default; note: left out; then the model
        script = "a\n2\n\n\nA desert planet and its spice.\n"
        done = engine("call", reading.url, "plan_reading", "--arg", "title=Dune", stdin=script)
        cancelled = engine("call", reading.url, "plan_reading", "--arg", "title=Dune", stdin="c\n")
        # the argument travels in an Mcp-Param-City header too (base64 when not plain ASCII)
        headed = engine("call", reading.url, "nearest_shop", "--arg", "city=Zürich")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "  format (one of paper, ebook, required)" in out
    assert "    1) paper  2) ebook" in out
    assert "  pages_per_day (integer, default 30) — How fast you read" in out
    assert "  The server asks the model. You are the model:" in out
    assert "    user: Summarise Dune in one line" in out
    assert f"  roots: {ROOT.as_uri()} (the working directory)" in out
    assert f"ebook, 30/day, note=None; A desert planet and its spice.; {ROOT.as_uri()}" in out
    assert cancelled.returncode == 1
    assert "elicitation was cancel" in cancelled.stdout
    assert headed.returncode == 0, headed.stderr
    assert "the shop in Zürich" in headed.stdout


# --- calls, show, export --------------------------------------------------------------------------


def test_calls_lists_recorded_calls_newest_first(server: Server, recorded: str) -> None:
    table = engine("calls", "--store", server.store)
    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header.split()[:5] == ["CALL", "ID", "SERVER", "TOOL", "ROUNDS"]
    assert any(row.startswith(recorded) and "order_book" in row for row in rows)

    listed = json.loads(engine("calls", "--store", server.store, "--json").stdout)
    assert [c["last_ts"] for c in listed] == sorted((c["last_ts"] for c in listed), reverse=True)
    assert (
        len(json.loads(engine("calls", "--store", server.store, "--json", "--limit", "1").stdout))
        == 1
    )
    assert engine("calls", "--store", server.store, "--tool", "nothing").stdout == (
        "No recorded calls matching the filters.\n"
    )
    future = engine("calls", "--store", server.store, "--since", "2999-01-01T00:00")
    assert "No recorded calls" in future.stdout
    recent = json.loads(engine("calls", "--store", server.store, "--since", "10m", "--json").stdout)
    assert recorded in [c["call_id"] for c in recent]


def test_show_prints_the_timeline_of_a_call(server: Server, recorded: str) -> None:
    # the end of an id will do (its start is the call's time); the server's keys open the journal
    shown = engine("show", recorded[-8:], "--store", server.store, ENGINE_KEYS=KEY)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert text.startswith(f"Call {recorded}: tools/call order_book, 2 rounds, complete")
    assert '  arguments {"title": "Neuromancer"}' in text
    assert "Round 1  +0.000 s  replica cli-test" in text
    assert "  asks    confirm_backorder: elicitation/create (form)" in text
    assert "field confirm (boolean, required) — Order anyway and wait?" in text
    assert f"  answer  confirm_backorder: {YES}" in text
    assert "  result  Backordered 'Neuromancer'; it ships in 2-3 weeks." in text

    as_json = json.loads(
        engine("show", recorded, "--store", server.store, "--json", ENGINE_KEYS=KEY).stdout
    )
    assert [e["round"] for e in as_json["events"]] == [1, 2]


def test_export_writes_a_fixture_that_replays(
    server: Server, recorded: str, tmp_path: Path
) -> None:
    exported = engine("export", recorded, "--store", server.store, ENGINE_KEYS=KEY)
    assert exported.returncode == 0, exported.stderr
    fixture = tmp_path / "order.json"
    fixture.write_text(exported.stdout)
    document = json.loads(exported.stdout)
    assert (document["format"], document["call_id"]) == ("engine-call/1", recorded)

    replayed = engine("replay", "--file", str(fixture), "--app", "examples/bookshop_server.py")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "All 2 rounds match the record." in replayed.stdout


def test_journal_commands_explain_a_missing_store(tmp_path: Path) -> None:
    missing = engine("calls", "--store", f"sqlite:///{tmp_path}/nothing.sqlite3")
    assert missing.returncode == 2
    assert "no journal at" in missing.stderr and "--store" in missing.stderr
    assert not (tmp_path / "nothing.sqlite3").exists()  # reading creates nothing

    memory = engine("show", "abc", "--store", "memory://")
    assert memory.returncode == 2
    assert "memory:// lives inside the server process" in memory.stderr

    unknown = engine("show", "0" * 24, "--store", f"sqlite:///{tmp_path}/nothing.sqlite3")
    assert unknown.returncode == 2


# --- replay ---------------------------------------------------------------------------------------


def test_replay_from_the_store_matches_and_writes_nothing(server: Server, recorded: str) -> None:
    before = store_contents(server.path)
    app = "examples/bookshop_server.py"
    replayed = engine("replay", recorded, "--store", server.store, "--app", app, ENGINE_KEYS=KEY)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    lines = replayed.stdout.splitlines()
    assert lines[0] == (
        f"Replaying call {recorded} (tools/call order_book, 2 recorded rounds) against the live "
        "code."
    )
    assert lines[1].startswith("round 1: ok (input_required, asks confirm_backorder;")
    assert lines[2].startswith("round 2: ok (complete;")
    assert lines[3] == "All 2 rounds match the record."
    assert store_contents(server.path) == before
    assert sum(len(rows) for rows in before.values()) > 0


REWORDED_APP = """
from examples.bookshop import build, confirm_backorder, Backorder, Stock, check_stock
from typing import Annotated
from engine import Elicit, Resolve

mcp = build()


async def reworded(
    title: str, stock: Annotated[Stock, Resolve(check_stock)]
) -> Backorder | Elicit[Backorder]:
    if stock.copies > 0:
        return Backorder(confirm=True)
    return Elicit(f"{title!r} is sold out for now. Backorder it?", Backorder)


mcp.dependency_overrides[confirm_backorder] = reworded
"""


def test_replay_names_the_round_and_key_of_a_reworded_question(
    server: Server, recorded: str, tmp_path: Path
) -> None:
    app = tmp_path / "reworded_server.py"
    app.write_text(REWORDED_APP)
    before = store_contents(server.path)

    replayed = engine(
        "replay", recorded, "--store", server.store, "--app", str(app), ENGINE_KEYS=KEY
    )

    assert replayed.returncode == 1, replayed.stderr
    out = replayed.stdout
    assert "warning: the code of order_book changed since this call was recorded" in out
    assert "DIVERGED at round 1, question 'confirm_backorder'" in out
    assert '-    "message": "\'Neuromancer\' is out of stock (2-3 weeks). Order anyway?",' in out
    assert '+    "message": "\'Neuromancer\' is sold out for now. Backorder it?",' in out
    assert store_contents(server.path) == before


def test_replay_without_recorded_arguments_says_how_to_give_them(tmp_path: Path) -> None:
    document = json.loads((ROOT / "tests/fixtures/order_book_neuromancer.json").read_text())
    for event in document["events"]:
        event["arguments"] = None
    fixture = tmp_path / "no_arguments.json"
    fixture.write_text(json.dumps(document))
    app = ["--app", "examples/bookshop_server.py"]

    refused = engine("replay", "--file", str(fixture), *app)
    assert refused.returncode == 2
    assert "ENGINE_JOURNAL_ARGUMENTS=1" in refused.stderr and "--args" in refused.stderr

    given = engine("replay", "--file", str(fixture), *app, "--args", '{"title": "Neuromancer"}')
    assert given.returncode == 0, given.stdout + given.stderr


def test_the_committed_fixtures_replay_from_the_command_line() -> None:
    app = ["--app", "examples/bookshop_server.py"]
    good = engine("replay", "--file", "tests/fixtures/order_book_neuromancer.json", *app)
    assert good.returncode == 0, good.stdout + good.stderr
    diverged = engine("replay", "--file", "tests/fixtures/order_book_reworded.json", *app)
    assert diverged.returncode == 1
    assert "DIVERGED at round 1, question 'confirm_backorder'" in diverged.stdout


def test_replay_json_prints_the_report_with_the_divergence_whole() -> None:
    app = ["--app", "examples/bookshop_server.py", "--json"]
    good = engine("replay", "--file", "tests/fixtures/order_book_neuromancer.json", *app)
    assert good.returncode == 0, good.stdout + good.stderr
    report = json.loads(good.stdout)
    assert report["ok"] is True and report["divergence"] is None
    assert [check["matched"] for check in report["rounds"]] == [True, True]
    diverged = engine("replay", "--file", "tests/fixtures/order_book_reworded.json", *app)
    assert diverged.returncode == 1
    report = json.loads(diverged.stdout)
    divergence = report["divergence"]
    assert (divergence["round"], divergence["what"], divergence["key"]) == (
        1,
        "question",
        "confirm_backorder",
    )
    assert divergence["recorded"]["params"]["message"] == (
        "'Neuromancer' is sold out for now. Backorder it?"
    )
    assert divergence["live"]["params"]["message"] == (
        "'Neuromancer' is out of stock (2-3 weeks). Order anyway?"
    )
    assert "DIVERGED at round 1" in report["report"]


# --- inspect --------------------------------------------------------------------------------------


def first_round_token(server: Server) -> str:
    params = {
        "name": "order_book",
        "arguments": {"title": "Neuromancer"},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        },
    }
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "order_book",
    }
    request = urllib.request.Request(server.url, body.encode(), headers, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        token: str = json.loads(response.read())["result"]["requestState"]
    return token


def test_inspect_decodes_a_request_state_only_with_the_right_key(server: Server) -> None:
    token = first_round_token(server)

    opened = engine("inspect", token, "--keys", KEY)
    assert opened.returncode == 0, opened.stderr
    shown = json.loads(opened.stdout)
    assert shown["claims"]["round"] == 1
    assert shown["claims"]["expired"] is False
    assert len(shown["claims"]["call_id"]) == 2 * engine_claims.CALL_ID_BYTES
    assert shown["state"]["answers"] == shown["state"]["checkpoints"] == {}
    assert list(shown["state"]["asked"]) == ["confirm_backorder"]

    from_env = engine("inspect", "-", stdin=token, ENGINE_KEYS=f"{OTHER_KEY},{KEY}")
    assert json.loads(from_env.stdout) == shown  # a ring opens it too

    refused = engine("inspect", token, "--keys", OTHER_KEY)
    assert refused.returncode == 1
    assert refused.stdout == ""
    assert "which is not among the keys given" in refused.stderr

    garbage = engine("inspect", "not-a-token", "--keys", KEY)
    assert garbage.returncode == 1
    assert "this is not a requestState" in garbage.stderr
