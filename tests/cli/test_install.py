"""``python -m engine install HOST FILE.py``: each host's file, in its documented shape, kept
as it was around the entry, unchanged by a second run, and refused when it is not JSON.

Every run has a home of its own (HOME, XDG_CONFIG_HOME, APPDATA) and a project directory as its
working directory; the entry written is then launched as a host launches it.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from engine.cli.main import main
from tests.cli.command_line import run_in_process
from tests.fleet_helpers import ROOT

SERVER = """\
from engine import MCPServer

mcp = MCPServer("Note Pad")


@mcp.tool()
def jot(text: str) -> str:
    \"\"\"Keep a note.\"\"\"
    return f"noted: {text}"
"""


@dataclass
class Setup:
    home: Path
    project: Path
    server: Path

    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("ENGINE_") and k not in ("PYTHONPATH", "XDG_CONFIG_HOME")
        }
        return {**env, "HOME": str(self.home), "APPDATA": str(self.home / "AppData" / "Roaming")}

    def install(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """``python -m engine install ARGS``, in this process (the server file is still loaded
        in a process of its own, as install always does)."""
        return run_in_process(["install", *args], cwd or self.project, environ=self.env())


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    server = tmp_path / "notes" / "notepad.py"
    server.parent.mkdir()
    server.write_text(SERVER)
    return Setup(home, project, server)


def claude_desktop_file(setup: Setup) -> Path:
    if sys.platform == "darwin":
        return setup.home / "Library/Application Support/Claude/claude_desktop_config.json"
    return setup.home / ".config/Claude/claude_desktop_config.json"


# Each host's documented shape of one stdio server, and where its servers are in its file.
PLAIN_KEYS = {"command", "args", "env"}
HOSTS: dict[str, tuple[str, tuple[str, ...], set[str], set[str]]] = {
    # host: (file under home or project, path to the servers, required keys, allowed keys)
    "claude-desktop": ("desktop", ("mcpServers",), {"command", "args"}, PLAIN_KEYS),
    "claude-code": (
        "home:.claude.json",
        ("projects", "<project>", "mcpServers"),
        {"type", "command", "args", "env"},
        {"type", "command", "args", "env"},
    ),
    "cursor": ("home:.cursor/mcp.json", ("mcpServers",), {"command", "args"}, PLAIN_KEYS),
    "vscode": (
        "project:.vscode/mcp.json",
        ("servers",),
        {"type", "command", "args"},
        {"type", "command", "args", "env", "envFile", "cwd"},
    ),
}


def config_file(setup: Setup, where: str) -> Path:
    if where == "desktop":
        return claude_desktop_file(setup)
    base, _, relative = where.partition(":")
    return (setup.home if base == "home" else setup.project) / relative


def servers_in(config: dict[str, Any], keys: tuple[str, ...], setup: Setup) -> dict[str, Any]:
    place: Any = config
    for key in keys:
        place = place[str(setup.project) if key == "<project>" else key]
    assert isinstance(place, dict)
    return place


def assert_launch(entry: dict[str, Any], setup: Setup) -> None:
    """A stdio launch any host can run: an absolute interpreter, absolute paths."""
    assert Path(entry["command"]).is_absolute()
    assert os.access(entry["command"], os.X_OK)
    assert entry["args"] == ["-m", "engine", "serve", str(setup.server), "--stdio"]
    assert entry.get("type", "stdio") == "stdio"


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_each_host_gets_its_documented_shape_and_a_second_run_changes_nothing(
    host: str, setup: Setup
) -> None:
    where, keys, required, allowed = HOSTS[host]
    path = config_file(setup, where)
    done = setup.install(host, str(setup.server))
    assert done.returncode == 0, done.stderr
    config = json.loads(path.read_text())
    assert set(config) == {keys[0]}
    servers = servers_in(config, keys, setup)
    assert list(servers) == ["note-pad"]  # from MCPServer("Note Pad")
    entry = servers["note-pad"]
    assert required <= set(entry) <= allowed
    assert_launch(entry, setup)
    assert f"added 'note-pad' in {path}" in done.stdout or "added 'note-pad' in ~/" in done.stdout

    before = path.read_bytes(), path.stat().st_mtime_ns
    again = setup.install(host, str(setup.server))
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("unchanged: ")
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_what_was_in_the_file_is_kept(setup: Setup) -> None:
    path = claude_desktop_file(setup)
    path.parent.mkdir(parents=True)
    other = {"command": "npx", "args": ["-y", "some-server"], "env": {"TOKEN": "x"}}
    path.write_text(json.dumps({"globalShortcut": "Ctrl+Space", "mcpServers": {"other": other}}))
    done = setup.install("claude-desktop", str(setup.server), "--name", "notes", "--env", "A=1")
    assert done.returncode == 0, done.stderr
    config = json.loads(path.read_text())
    assert config["globalShortcut"] == "Ctrl+Space"
    assert config["mcpServers"]["other"] == other
    assert config["mcpServers"]["notes"]["env"] == {"A": "1"}
    assert list(config["mcpServers"]) == ["other", "notes"]

    changed = setup.install("claude-desktop", str(setup.server), "--name", "notes", "--env", "A=2")
    assert changed.stdout.startswith("updated 'notes' in ")
    assert json.loads(path.read_text())["mcpServers"]["notes"]["env"] == {"A": "2"}


def test_claude_code_scopes_write_where_claude_mcp_add_does(setup: Setup) -> None:
    claude = setup.home / ".claude.json"
    claude.write_text(json.dumps({"numStartups": 3, "projects": {"/elsewhere": {"x": 1}}}))
    assert setup.install("claude-code", str(setup.server), "--scope", "user").returncode == 0
    assert setup.install("claude-code", str(setup.server)).returncode == 0
    config = json.loads(claude.read_text())
    assert config["numStartups"] == 3
    assert config["projects"]["/elsewhere"] == {"x": 1}
    assert_launch(config["mcpServers"]["note-pad"], setup)
    assert_launch(config["projects"][str(setup.project)]["mcpServers"]["note-pad"], setup)
    assert config["mcpServers"]["note-pad"]["env"] == {}

    done = setup.install("claude-code", str(setup.server), "--scope", "project")
    assert done.returncode == 0, done.stderr
    shared = json.loads((setup.project / ".mcp.json").read_text())
    assert_launch(shared["mcpServers"]["note-pad"], setup)


def test_cursor_and_vscode_other_scopes(setup: Setup) -> None:
    done = setup.install("cursor", str(setup.server), "--scope", "project")
    assert done.returncode == 0, done.stderr
    cursor = json.loads((setup.project / ".cursor/mcp.json").read_text())
    assert_launch(cursor["mcpServers"]["note-pad"], setup)

    vscode_user = setup.home / (
        "Library/Application Support/Code/User/mcp.json"
        if sys.platform == "darwin"
        else ".config/Code/User/mcp.json"
    )
    vscode_user.parent.mkdir(parents=True)
    vscode_user.write_text(json.dumps({"inputs": [{"id": "key", "type": "promptString"}]}))
    done = setup.install("vscode", str(setup.server), "--scope", "user")
    assert done.returncode == 0, done.stderr
    config = json.loads(vscode_user.read_text())
    assert config["inputs"] == [{"id": "key", "type": "promptString"}]
    assert_launch(config["servers"]["note-pad"], setup)


def test_mcp_json_is_printed_and_nothing_written(setup: Setup) -> None:
    done = setup.install("mcp-json", f"{setup.server}:mcp", "--env", "GREETING=hi there")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    entry = printed["mcpServers"]["note-pad"]
    assert set(entry) == {"command", "args", "env"}
    assert entry["args"][3] == f"{setup.server}:mcp"
    assert entry["env"] == {"GREETING": "hi there"}
    assert list(setup.home.iterdir()) == [] and list(setup.project.iterdir()) == []


def test_the_entry_starts_the_server_as_a_host_does(setup: Setup, tmp_path: Path) -> None:
    """The command and variables written, run from elsewhere, serve the tool over stdio."""
    done = setup.install("mcp-json", str(setup.server), "--env", "ENGINE_STORE=memory://")
    entry = json.loads(done.stdout)["mcpServers"]["note-pad"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    command = shlex.join([entry["command"], *entry["args"]])
    listed = subprocess.run(
        [sys.executable, "-m", "engine", "list", "--json", "--stdio", command],
        cwd=elsewhere,
        env={**setup.env(), **entry["env"]},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    assert [tool["name"] for tool in json.loads(listed.stdout)["tools"]] == ["jot"]


def test_a_file_importing_from_the_checkout_gets_pythonpath(setup: Setup) -> None:
    done = setup.install("mcp-json", "examples/bookshop_server.py", cwd=ROOT)
    assert done.returncode == 0, done.stderr
    entry = json.loads(done.stdout)["mcpServers"]["bookshop"]
    assert entry["args"][3] == str(ROOT / "examples" / "bookshop_server.py")
    assert entry["env"] == {"PYTHONPATH": str(ROOT)}
    assert f"note: added PYTHONPATH={ROOT} to its environment" in done.stderr


def test_a_malformed_config_is_refused_and_left_alone(setup: Setup) -> None:
    path = setup.home / ".cursor" / "mcp.json"
    path.parent.mkdir()
    broken = '{\n  "mcpServers": {\n    "other": {"command": "x",}\n  }\n}\n'
    path.write_text(broken)
    done = setup.install("cursor", str(setup.server))
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(
        f"error: {path} is not valid JSON (Expecting property name enclosed in double quotes "
        "at line 3 column 30); nothing was written. Fix it, or add the entry by hand: "
        '{"mcpServers": {"note-pad": {"command": '
    )
    assert path.read_text() == broken

    path.write_text('{"mcpServers": ["not", "an", "object"]}')
    done = setup.install("cursor", str(setup.server))
    assert done.returncode == 2
    assert done.stderr == (
        f"error: {path}: mcpServers is a JSON list, not an object of servers; nothing was "
        "written. Fix it and run install again\n"
    )


def test_a_server_that_does_not_load_is_not_installed(setup: Setup) -> None:
    done = setup.install("claude-desktop", f"{setup.server}:nothing")
    assert done.returncode == 2
    assert done.stderr.startswith(
        "error: as a host would start it (from another directory): "
        f"{setup.server} has no attribute 'nothing'"
    )
    assert not claude_desktop_file(setup).exists()


def test_install_and_dev_answer_help(capsys: pytest.CaptureFixture[str]) -> None:
    overview = main_help()
    for name in ("install", "dev"):
        with pytest.raises(SystemExit) as exited:
            main([name, "--help"])
        assert exited.value.code == 0
        said = capsys.readouterr().out
        assert said.startswith(f"usage: python -m engine {name}")
        assert f"    {name}" in overview
        if name == "install":
            assert "claude-desktop, claude-code, cursor, vscode, mcp-json" in said


def main_help() -> str:
    done = subprocess.run(
        [sys.executable, "-m", "engine", "--help"], capture_output=True, text=True, timeout=60
    )
    return done.stdout
