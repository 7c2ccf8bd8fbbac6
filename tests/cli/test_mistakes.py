"""Each mistake in docs/running.md's "When something is wrong": the line printed, and the exit.

The table is the specification: every row is run here and its line compared (``…`` in it
stands for text that depends on the machine), and every case here has its row.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.cli.shared import load_server
from tests.cli.command_line import run_in_process
from tests.cli.test_cli import Server, environment, serving
from tests.conftest import redis_for_tests
from tests.fleet_helpers import ROOT
from tests.unprivileged import Nobody, as_nobody

TABLE = ROOT / "docs/running.md"

SERVER = """\
from starlette.applications import Starlette

from engine import MCPServer

mcp = MCPServer("Notes")


@mcp.tool()
def ping(n: int) -> str:
    return f"pong {n}"


app = Starlette()
"""
BROKEN = """\
import os

raise RuntimeError("DATABASE_URL is not set")
"""
VARARGS = """\
from engine import MCPServer

mcp = MCPServer("Varargs")

@mcp.tool()
def ping(*args: str) -> str:
    return "pong"
"""
RESOLVE_DEFAULT = """\
from pydantic import BaseModel

from engine import MCPServer, Resolve

mcp = MCPServer("Shop")


class Stock(BaseModel):
    copies: int


async def check_stock(title: str) -> Stock:
    return Stock(copies=1)


@mcp.tool()
async def reserve(title: str, stock: Stock = Resolve(check_stock)) -> str:
    return title
"""
FORM_NOT_A_MODEL = """\
from typing import Annotated

from engine import Elicit, MCPServer, Resolve

mcp = MCPServer("Shop")


async def confirm(title: str) -> Elicit[dict]:
    return Elicit(f"Order {title}?", dict)


@mcp.tool()
async def order(title: str, ok: Annotated[dict, Resolve(confirm)]) -> str:
    return title
"""
OFFICIAL = """\
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("Ported")
"""
TWO_SERVERS = """\
from engine import MCPServer

mcp = MCPServer("Shop")
admin = MCPServer("Admin")
"""
FILES = {
    "server.py": SERVER,
    "official.py": OFFICIAL,
    "two.py": TWO_SERVERS,
    "fastapi_style.py": RESOLVE_DEFAULT,
    "form.py": FORM_NOT_A_MODEL,
    "broken.py": BROKEN,
    "varargs.py": VARARGS,
    "empty.keys": "\n   \n , \n",
}
WRONG_ANSWER = 'confirm_backorder={"action": "accept", "content": {"confirm": "maybe"}}'


def rows() -> dict[str, tuple[str, int]]:
    """``case → (line, exit status)`` from the table."""
    text = TABLE.read_text()
    section = text[text.index("## When something is wrong") :]
    found: dict[str, tuple[str, int]] = {}
    for row in section.splitlines():
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("case", "---"):
            continue
        line = re.search(r"`` (.*?) ``", cells[2])
        assert line is not None, row
        found[cells[0]] = (line.group(1), int(cells[3]))
    return found


def pattern(line: str, **values: str) -> re.Pattern[str]:
    for name, value in values.items():
        line = line.replace(name, value)
    return re.compile(".*?".join(map(re.escape, line.split("…"))))


def run(
    args: list[str], cwd: Path, stdin: str = "", **env: str
) -> subprocess.CompletedProcess[str]:
    return run_in_process(args, cwd, stdin, **env)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("mistakes")
    for name, text in FILES.items():
        (directory / name).write_text(text)
    return directory


@pytest.fixture(scope="module")
def bookshop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving("examples/bookshop_server.py", tmp_path_factory.mktemp("shop")) as running:
        yield running


@contextlib.contextmanager
def listening() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


CASES: dict[str, list[str]] = {
    "starlette": ["serve", "server.py:app"],
    "no-attribute": ["serve", "server.py:ap"],
    "no-file": ["serve", "sever.py"],
    "official-sdk": ["serve", "official.py"],
    "import-raises": ["serve", "broken.py"],
    "bad-signature": ["serve", "varargs.py"],
    "resolve-default": ["serve", "fastapi_style.py"],
    "form-not-a-model": ["serve", "form.py"],
    "call-no-scheme": ["call", "localhost:8000/mcp", "ping"],
    "store-scheme": ["serve", "server.py", "--store", "postgres://db/calls"],
    "store-sqlite-no-file": ["serve", "server.py", "--store", "sqlite:///"],
    "store-redis-port": ["serve", "server.py", "--store", "redis://localhost:99999/0"],
    "store-redis-db": ["serve", "server.py", "--store", "redis://localhost/x"],
    "redis-unreachable": ["serve", "server.py", "--store", "redis://127.0.0.1:1/0"],
    "keys-short": ["serve", "server.py", "--keys", "abc123"],
    "keys-id-short": ["serve", "server.py", "--keys", "k1=abc"],
    "port-range": ["serve", "server.py", "--port", "99999"],
    "call-timeout": ["call", "http://localhost:8000/mcp", "ping", "--timeout", "-1"],
    "call-max-rounds": ["call", "http://localhost:8000/mcp", "ping", "--max-rounds", "0"],
    "since-negative": ["calls", "--store", "sqlite:///calls.db", "--since", "-5"],
    "replay-both": ["replay", "CALL_ID", "--file", "fixture.json"],
    "keys-file-missing": ["serve", "server.py", "--keys-file", "nokeys"],
    "keys-file-empty": ["serve", "server.py", "--keys-file", "empty.keys"],
    "keys-and-file": ["serve", "server.py", "--keys", "x" * 32, "--keys-file", "empty.keys"],
}
"""The rows that need nothing but a command line; the others have a test of their own below."""
ENVIRONMENTS = {"store-env": {"ENGINE_STORE": "calls.db"}, "keys-env": {"ENGINE_KEYS": "k1="}}
OWN_TESTS = {"redis-db-refused", "port-in-use", "answer-type", "default-store-unwritable"}


def check(case: str, done: subprocess.CompletedProcess[str], **values: str) -> None:
    line, status = rows()[case]
    assert done.returncode == status, (case, done.stdout, done.stderr)
    assert len(done.stderr.splitlines()) == 1, (case, done.stderr)  # one line, no traceback
    assert pattern(line, **values).fullmatch(done.stderr.strip()), (case, line, done.stderr)


def test_the_table_and_the_tests_name_the_same_cases() -> None:
    assert set(rows()) == set(CASES) | set(ENVIRONMENTS) | OWN_TESTS


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_mistake_on_the_command_line_is_one_line(case: str, workdir: Path) -> None:
    check(case, run(CASES[case], workdir))


@pytest.mark.parametrize("case", sorted(ENVIRONMENTS))
def test_a_mistake_in_the_environment_is_one_line(case: str, workdir: Path) -> None:
    check(case, run(["serve", "server.py"], workdir, **ENVIRONMENTS[case]))


@pytest.mark.parametrize("case", ["store-scheme", "redis-unreachable"])
@pytest.mark.parametrize("command", [["dev"], ["serve", "--reload"]], ids=["dev", "reload"])
def test_a_store_mistake_is_the_same_line_when_reloading(
    case: str, command: list[str], workdir: Path
) -> None:
    """``dev`` and ``serve --reload`` refuse the store as ``serve`` does: before any server
    process starts, not by a process that fails on every change."""
    check(case, run([*command, "server.py", *CASES[case][2:]], workdir))


def test_the_traceback_is_there_when_asked_for(workdir: Path) -> None:
    for shown in (
        run(["serve", "broken.py", "--traceback"], workdir),
        run(["serve", "broken.py"], workdir, ENGINE_TRACEBACK="1"),
    ):
        assert shown.returncode == 2
        assert "Traceback (most recent call last)" in shown.stderr
        assert shown.stderr.splitlines()[-1].startswith("error: importing broken.py failed")


def test_a_file_with_two_servers_serves_mcp_and_says_so(
    workdir: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workdir)
    with caplog.at_level("WARNING", logger="engine.cli"):
        server = load_server("two.py")
    assert server.name == "Shop"
    assert "serving two.py:mcp; it also defines admin (serve one as two.py:admin)" in caplog.text


def test_a_port_in_use_is_found_before_uvicorn_starts(workdir: Path) -> None:
    with listening() as port:
        done = run(["serve", "server.py", "--port", str(port)], workdir)
    check("port-in-use", done, PORT=str(port))


@pytest.mark.parametrize("case", ["no-file", "no-attribute", "import-raises", "official-sdk"])
def test_a_mistake_in_the_file_is_found_before_the_port_is_looked_at(
    case: str, workdir: Path
) -> None:
    with listening() as port:
        check(case, run([*CASES[case], "--port", str(port)], workdir))


def test_a_database_index_the_server_refuses_is_one_line(workdir: Path) -> None:
    url = redis_for_tests()
    hostport = url.split("://", 1)[1].split("/", 1)[0].rpartition("@")[2]
    done = run(["serve", "server.py", "--store", f"redis://{hostport}/99"], workdir)
    check("redis-db-refused", done, **{"HOST:PORT": hostport})


def test_an_answer_of_the_wrong_type_says_why(bookshop: Server, workdir: Path) -> None:
    args = [
        "call",
        bookshop.url,
        "order_book",
        "--arg",
        "title=Neuromancer",
        "--answer",
        WRONG_ANSWER,
    ]
    done = run(args, workdir)
    check("answer-type", done)
    assert (
        "  --answer confirm_backorder does not fit the question: content.confirm: expected "
        'boolean, got "maybe"'
    ) in done.stdout
    answered = run(args, workdir, stdin="a\ny\n")  # at a prompt, the field is asked again
    assert answered.returncode == 0, answered.stdout + answered.stderr
    assert "confirm [y/n]: y" in answered.stdout


# --- the default store, from a directory nobody may write -------------------------------------

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "desktop-host", "version": "1"},
    },
}
CALL = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "ping", "arguments": {"n": 7}},
}


def unprivileged() -> list[str] | None:
    """A command prefix running this Python as ``nobody``, where that can be done."""
    nobody = as_nobody()
    return nobody.prefix if isinstance(nobody, Nobody) else None


@contextlib.contextmanager
def read_only_directory() -> Iterator[Path]:
    """A directory holding server.py that the server's user cannot write (0555, root's)."""
    directory = Path(tempfile.mkdtemp(prefix="engine-ro-"))  # not under pytest's 0700 tmp
    try:
        (directory / "server.py").write_text(SERVER)
        (directory / "server.py").chmod(0o444)
        directory.chmod(0o555)
        yield directory
    finally:
        directory.chmod(0o755)
        shutil.rmtree(directory)


def stdio(prefix: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """initialize, its answer, then the tool call (a host waits for the first answer too)."""
    process = subprocess.Popen(
        [*prefix, sys.executable, "-m", "engine", "serve", "server.py", "--stdio"],
        cwd=cwd,
        env=environment(**env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    replies = []
    try:
        for message in (INITIALIZE, CALL):
            process.stdin.write(json.dumps(message) + "\n")
            process.stdin.flush()
            replies.append(process.stdout.readline())
        stdout, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return subprocess.CompletedProcess(
        process.args, process.returncode, "".join(replies) + stdout, stderr
    )


def answers(done: subprocess.CompletedProcess[str]) -> dict[int, object]:
    replies = [json.loads(line) for line in done.stdout.splitlines()]  # stdout is the protocol
    return {reply["id"]: reply.get("result") for reply in replies}


def test_a_stdio_server_started_in_a_read_only_directory_serves(tmp_path: Path) -> None:
    """As ``nobody`` (so the permissions hold even though the tests run as root), from a 0555
    directory, with a HOME it cannot write: the default store cannot be made, the server warns
    and serves from memory. Where this Python cannot run as ``nobody``, the data directory is
    made a regular file instead, which no user can create a directory in."""
    prefix = unprivileged()
    with read_only_directory() as directory:
        if prefix is not None:
            probe = [*prefix, sys.executable, "-c", f"open({str(directory / 'x')!r}, 'w')"]
            assert subprocess.run(probe, capture_output=True).returncode != 0  # truly read-only
            env = {"HOME": str(directory), "XDG_DATA_HOME": ""}
        else:
            blocker = tmp_path / "data"
            blocker.write_text("a file where the data directory would be")
            env = {"XDG_DATA_HOME": str(blocker)}
        done = stdio(prefix or [], directory, **env)
    assert done.returncode == 0, done.stderr
    replies = answers(done)
    assert replies[1]["serverInfo"]["name"] == "Notes"  # type: ignore[index]
    assert replies[2]["content"][0]["text"] == "pong 7"  # type: ignore[index]
    line, status = rows()["default-store-unwritable"]
    warning = [row for row in done.stderr.splitlines() if "cannot create the default store" in row]
    assert len(warning) == 1 and pattern(line).search(warning[0]), done.stderr
    assert status == 0


def test_the_default_store_is_in_the_data_directory_and_the_journal_reads_it() -> None:
    prefix = unprivileged()
    data = Path(tempfile.mkdtemp(prefix="engine-data-"))
    try:
        if prefix is not None:
            os.chown(data, pwd.getpwnam("nobody").pw_uid, -1)
        with read_only_directory() as directory:
            done = stdio(prefix or [], directory, XDG_DATA_HOME=str(data))
            assert sorted(p.name for p in directory.iterdir()) == ["server.py"]
        assert done.returncode == 0, done.stderr
        assert answers(done)[2]["content"][0]["text"] == "pong 7", done  # type: ignore[index]
        store = data / "mcp-engine" / "calls.sqlite3"
        assert store.is_file()
        shown = f"store: sqlite:///{store} (the default; --store URL or ENGINE_STORE changes it)"
        assert shown in done.stderr
        listed = run(["calls", "--json"], ROOT, XDG_DATA_HOME=str(data))  # no --store given
        assert listed.returncode == 0, listed.stderr
        assert [c["target"] for c in json.loads(listed.stdout)] == ["ping"]
    finally:
        shutil.rmtree(data)
