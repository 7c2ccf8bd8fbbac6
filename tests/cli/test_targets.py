"""``list`` and ``call`` against the three kinds of target (a URL, a server file run in process,
``--stdio CMD``), and the progress and log notifications a call shows while its tool runs."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_cli import Server, Terminal, engine, environment, serving
from tests.fleet_helpers import ROOT

COUNTING_APP = '''
import asyncio

from pydantic import BaseModel

from engine import Context, MCPServer

mcp = MCPServer("Counting", instructions="Counts, slowly.")


class Count(BaseModel):
    counted: int


@mcp.tool()
async def count(to: int, ctx: Context) -> Count:
    """Count up to TO, reporting progress and logging each step."""
    for step in range(1, to + 1):
        await ctx.info(f"step {step}")
        await ctx.report_progress(step, to, message=f"counted {step}")
        await asyncio.sleep(0.05)
    await ctx.warning("done counting")
    return Count(counted=to)


@mcp.tool()
async def slow(ctx: Context) -> str:
    """Report half-way, then take its time."""
    await ctx.report_progress(1, 2)
    await asyncio.sleep(3)
    return "finished"


@mcp.tool()
def fail(why: str) -> str:
    raise ValueError(why)


@mcp.prompt()
def greet(name: str) -> str:
    """Say hello."""
    return f"Hello {name}"


@mcp.resource("notes://today")
def today() -> str:
    """Today's note."""
    return "nothing"


@mcp.resource("notes://{day}")
def note(day: str) -> str:
    return day
'''

COUNT_LINES = [
    "  progress 1/3 counted 1",
    "  progress 2/3 counted 2",
    "  progress 3/3 counted 3",
    "  log info: step 1",
    "  log info: step 2",
    "  log info: step 3",
    "  log warning: done counting",
]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("targets") / "counting_server.py"
    path.write_text(COUNTING_APP)
    return path


@pytest.fixture(scope="module")
def http(app: Path) -> Iterator[Server]:
    with serving(str(app), app.parent) as server:
        yield server


def stdio_command(app: Path) -> str:
    return shlex.join([sys.executable, "-m", "engine", "serve", str(app), "--stdio"])


def targets(app: Path, http: Server) -> dict[str, list[str]]:
    return {
        "url": [http.url],
        "file": [str(app)],
        "stdio": ["--stdio", stdio_command(app)],
    }


KINDS = ["url", "file", "stdio"]


@pytest.mark.parametrize("kind", KINDS)
def test_list_prints_tools_prompts_resources_and_templates_with_schemas(
    kind: str, app: Path, http: Server
) -> None:
    done = engine("list", *targets(app, http)[kind])
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("server Counting ")
    assert "Counts, slowly." in out
    assert "tools (3)" in out
    assert "  count\n    Count up to TO, reporting progress and logging each step.\n" in out
    assert "      to (integer, required)" in out
    assert '    input schema: {"type": "object", "properties": {"to": ' in out
    assert '    output schema: {"properties": {"counted": ' in out
    assert "prompts (1)" in out and "      name (required)" in out
    assert "resources (1)" in out and "notes://today  today [text/plain]" in out
    assert "resource templates (1)" in out and "notes://{day}  note" in out
    assert "\x1b[" not in out  # piped: no escape codes


def test_list_json_is_the_same_from_every_kind_of_target(app: Path, http: Server) -> None:
    listed = {}
    for kind, target in targets(app, http).items():
        done = engine("list", *target, "--json")
        assert done.returncode == 0, (kind, done.stderr)
        listed[kind] = json.loads(done.stdout)
    assert listed["url"] == listed["file"] == listed["stdio"]
    found = listed["file"]
    assert found["server"]["serverInfo"]["name"] == "Counting"
    assert found["server"]["instructions"] == "Counts, slowly."
    tools = {tool["name"]: tool for tool in found["tools"]}
    assert set(tools) == {"count", "slow", "fail"}
    assert tools["count"]["inputSchema"]["required"] == ["to"]
    assert tools["count"]["outputSchema"]["properties"]["counted"]["type"] == "integer"
    assert [p["name"] for p in found["prompts"]] == ["greet"]
    assert [r["uri"] for r in found["resources"]] == ["notes://today"]
    assert [t["uriTemplate"] for t in found["resourceTemplates"]] == ["notes://{day}"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_call_shows_progress_and_log_lines_before_its_result(
    kind: str, app: Path, http: Server
) -> None:
    done = engine("call", *targets(app, http)[kind], "count", "--arg", "to=3")
    assert done.returncode == 0, (done.stdout, done.stderr)
    lines = done.stdout.splitlines()
    shown = [line for line in lines if line.startswith(("  progress", "  log"))]
    assert sorted(shown) == sorted(COUNT_LINES)
    result = lines.index(next(line for line in lines if line.startswith("round 1 ←")))
    assert all(lines.index(line) < result for line in shown)
    assert "counted" in done.stdout.split("round 1 ←")[1]
    assert "\x1b[" not in done.stdout


def test_log_level_filters_the_log_lines(app: Path) -> None:
    done = engine("call", str(app), "count", "--arg", "to=2", "--log-level", "warning")
    assert done.returncode == 0, done.stderr
    assert "  log warning: done counting" in done.stdout
    assert "log info" not in done.stdout
    assert "  progress 2/2 counted 2" in done.stdout


@pytest.mark.parametrize("kind", KINDS)
def test_an_error_result_exits_1_from_every_kind_of_target(
    kind: str, app: Path, http: Server
) -> None:
    done = engine("call", *targets(app, http)[kind], "fail", "--arg", "why=broken")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "broken" in done.stdout


def test_target_mistakes_exit_2(app: Path) -> None:
    both = engine("call", str(app), "count", "--stdio", stdio_command(app))
    assert both.returncode == 2
    assert "not both" in both.stderr
    neither = engine("list")
    assert neither.returncode == 2
    assert "give a TARGET" in neither.stderr
    unknown = engine("call", str(app), "nope")
    assert unknown.returncode == 2
    assert "has no tool 'nope'" in unknown.stderr
    dead = engine("list", "--stdio", f"{shlex.quote(sys.executable)} -c pass")
    assert dead.returncode == 2
    assert "before answering" in dead.stderr
    missing = engine("list", "missing_server.py")
    assert missing.returncode == 2
    assert "missing_server.py is not a file" in missing.stderr


def test_progress_over_http_shows_while_the_tool_still_runs(http: Server) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "engine", "call", http.url, "slow"],
        cwd=ROOT,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    started = time.monotonic()
    for line in process.stdout:
        if line.startswith("  progress"):
            break
    seen = time.monotonic() - started
    assert line == "  progress 1/2\n"
    assert process.poll() is None, "the progress line came only once the call was over"
    assert process.wait(30) == 0
    assert time.monotonic() - started > seen + 1


def test_on_a_terminal_the_progress_bar_is_redrawn_in_place(app: Path) -> None:
    terminal = Terminal("call", str(app), "count", "--arg", "to=3")
    status = terminal.finish()
    assert status == 0, terminal.output
    out = terminal.output
    assert "\r\x1b[2K  " in out  # redrawn in place
    assert "█" * 30 + " 100% 3/3 counted 3" in out
    assert "\x1b[33m  log warning: done counting\x1b[0m" in out  # coloured
    assert "  progress 1/3" not in out  # the plain lines are for pipes


def test_list_on_a_terminal_has_coloured_headers(app: Path) -> None:
    terminal = Terminal("list", str(app))
    assert terminal.finish() == 0, terminal.output
    assert "\x1b[1;34mtools (3)\x1b[0m" in terminal.output
