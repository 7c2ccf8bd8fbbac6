"""``install HOST FILE.py``: add a server to a desktop host's MCP configuration.

Each host launches the server itself, over stdio, with the command written into its file:
this interpreter (``sys.executable``, so the host runs the environment this package is installed
in) running ``-m engine serve /absolute/FILE.py --stdio``. The file is read, the one entry set,
everything else kept as it was, and the file replaced whole (a draft renamed over it), so a host
never reads half a file; an entry already as it would be written leaves the file untouched.

Before anything is written the server file is loaded the way the host will load it: by that
interpreter, from another directory, with the ``--env`` variables. A file that needs the current
directory on the import path (``from examples.bookshop import ...`` run from a checkout) gets it
as ``PYTHONPATH`` in the entry, said so; one that does not load at all is refused with the reason.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.cli.shared import CLIError, split_target

CHECK_TIMEOUT = 120.0
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

LOAD_CHECK = """\
import json, sys
from engine.cli.shared import CLIError, load_server
try:
    server = load_server(sys.argv[1])
except CLIError as exc:
    print(json.dumps({"error": str(exc)}))
else:
    print(json.dumps({"name": server.name}))
"""


# --- where each host keeps its servers ----------------------------------------------------------


def _home() -> Path:
    return Path(os.path.expanduser("~"))


def _app_config_dir() -> Path:
    """Where desktop apps keep their settings: ``~/Library/Application Support`` on macOS,
    ``%APPDATA%`` on Windows, ``$XDG_CONFIG_HOME`` (when absolute) or ``~/.config`` elsewhere."""
    if sys.platform == "darwin":
        return _home() / "Library" / "Application Support"
    if sys.platform == "win32":
        appdata = os.environ.get("APPDATA", "").strip()
        return Path(appdata) if appdata else _home() / "AppData" / "Roaming"
    xdg = os.environ.get("XDG_CONFIG_HOME", "").strip()
    return Path(xdg) if os.path.isabs(xdg) else _home() / ".config"


@dataclass(frozen=True)
class Destination:
    """One configuration file and where in it the servers are."""

    path: Path
    keys: tuple[str, ...]
    """The object holding the servers, by its keys from the top (``mcpServers``)."""
    label: str
    """How the message names the place (``Claude Code, user scope``)."""
    then: str
    """What to do for the host to load it."""


@dataclass(frozen=True)
class Host:
    name: str
    title: str
    scopes: dict[str, Callable[[], Destination]]
    default_scope: str
    entry: Callable[[str, list[str], dict[str, str]], dict[str, Any]]


def _plain(command: str, args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """``command``, ``args`` and, when there are variables, ``env``: Claude Desktop's and
    Cursor's documented shape, and the portable ``mcp.json``'s."""
    entry: dict[str, Any] = {"command": command, "args": args}
    if env:
        entry["env"] = env
    return entry


def _typed(command: str, args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """VS Code's shape: ``"type": "stdio"`` first, ``env`` when there are variables."""
    return {"type": "stdio", **_plain(command, args, env)}


def _claude_code(command: str, args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """What ``claude mcp add`` writes for a stdio server: ``type``, ``command``, ``args``,
    ``env`` (empty when there are no variables)."""
    return {"type": "stdio", "command": command, "args": args, "env": env}


def _claude_desktop() -> Destination:
    return Destination(
        _app_config_dir() / "Claude" / "claude_desktop_config.json",
        ("mcpServers",),
        "Claude Desktop",
        "quit and reopen Claude Desktop to start it",
    )


def _claude_code_local() -> Destination:
    project = str(Path.cwd())
    return Destination(
        _home() / ".claude.json",
        ("projects", project, "mcpServers"),
        f"Claude Code, local scope: this directory only, {project}",
        "start claude in this directory; /mcp lists it",
    )


def _claude_code_user() -> Destination:
    return Destination(
        _home() / ".claude.json",
        ("mcpServers",),
        "Claude Code, user scope: every project",
        "start claude; /mcp lists it",
    )


def _claude_code_project() -> Destination:
    return Destination(
        Path.cwd() / ".mcp.json",
        ("mcpServers",),
        "Claude Code, project scope: shared with whoever has this directory",
        "start claude here and approve the project's server when asked",
    )


def _cursor_user() -> Destination:
    return Destination(
        _home() / ".cursor" / "mcp.json",
        ("mcpServers",),
        "Cursor, every project",
        "restart Cursor, or turn it on in its MCP settings",
    )


def _cursor_project() -> Destination:
    return Destination(
        Path.cwd() / ".cursor" / "mcp.json",
        ("mcpServers",),
        "Cursor, this project",
        "restart Cursor, or turn it on in its MCP settings",
    )


def _vscode_project() -> Destination:
    return Destination(
        Path.cwd() / ".vscode" / "mcp.json",
        ("servers",),
        "VS Code, this workspace",
        "open this folder in VS Code and start it from mcp.json (or MCP: List Servers)",
    )


def _vscode_user() -> Destination:
    return Destination(
        _app_config_dir() / "Code" / "User" / "mcp.json",
        ("servers",),
        "VS Code, your user profile",
        "start it in VS Code with MCP: List Servers",
    )


HOSTS = {
    host.name: host
    for host in (
        Host("claude-desktop", "Claude Desktop", {"user": _claude_desktop}, "user", _plain),
        Host(
            "claude-code",
            "Claude Code",
            {
                "local": _claude_code_local,
                "user": _claude_code_user,
                "project": _claude_code_project,
            },
            "local",
            _claude_code,
        ),
        Host(
            "cursor", "Cursor", {"user": _cursor_user, "project": _cursor_project}, "user", _plain
        ),
        Host(
            "vscode",
            "VS Code",
            {"project": _vscode_project, "user": _vscode_user},
            "project",
            _typed,
        ),
    )
}
PRINTED = "mcp-json"
"""The portable ``{"mcpServers": {...}}`` printed to stdout, for any other host."""
HOST_NAMES = [*HOSTS, PRINTED]


# --- the launch --------------------------------------------------------------------------------


def _environment(pairs: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not ENV_NAME.fullmatch(key):
            raise CLIError(
                f"--env {pair!r}: give KEY=VALUE, KEY made of letters, digits and underscores"
            )
        env[key] = value
    return env


def _load_elsewhere(target: str, env: dict[str, str]) -> dict[str, Any]:
    """Load ``target`` as the host will: this interpreter, another directory, ``env`` given."""
    run_env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    run_env.update(env)
    with tempfile.TemporaryDirectory(prefix="engine-install-") as elsewhere:
        try:
            done = subprocess.run(
                [sys.executable, "-c", LOAD_CHECK, target],
                cwd=elsewhere,
                env=run_env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=CHECK_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise CLIError(
                f"loading {target} took over {CHECK_TIMEOUT:.0f}s; a host would give up too: "
                "make importing it quick"
            ) from None
    lines = done.stdout.strip().splitlines()
    try:
        said: dict[str, Any] = json.loads(lines[-1])
    except (IndexError, ValueError):
        reason = " ".join(done.stderr.split())[-500:] or f"exit status {done.returncode}"
        raise CLIError(f"{sys.executable} cannot load {target}: {reason}") from None
    return said


@dataclass(frozen=True)
class Launch:
    name: str
    command: str
    args: list[str]
    env: dict[str, str]
    note: str | None


def launch(target: str, name: str | None, pairs: list[str]) -> Launch:
    path, _, attr = split_target(target)
    absolute = f"{path}:{attr}" if attr else str(path)
    env = _environment(pairs)
    loaded = _load_elsewhere(absolute, env)
    note = None
    if "error" in loaded and "PYTHONPATH" not in env:
        here = str(Path.cwd())
        retried = _load_elsewhere(absolute, {**env, "PYTHONPATH": here})
        if "error" not in retried:
            env["PYTHONPATH"], loaded = here, retried
            note = (
                f"added PYTHONPATH={here} to its environment: {path.name} imports modules "
                "found from this directory, and the host starts it elsewhere"
            )
    if "error" in loaded:
        raise CLIError(f"as a host would start it (from another directory): {loaded['error']}")
    if name is None:
        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(loaded["name"])).strip("-.").lower()
        name = name or path.stem
    elif not NAME.fullmatch(name):
        raise CLIError(f"--name {name!r}: use letters, digits, '-', '_' and '.'")
    args = ["-m", "engine", "serve", absolute, "--stdio"]
    return Launch(name, sys.executable, args, env, note)


# --- the file --------------------------------------------------------------------------------


def _read(path: Path, snippet: str) -> dict[str, Any]:
    """The file's JSON object ({} when it is missing or empty); CLIError when it is not one."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise CLIError(f"cannot read {path} ({reason}); nothing was written") from None
    if not text.strip():
        return {}
    try:
        found = json.loads(text)
    except ValueError as exc:
        where = ""
        if isinstance(exc, json.JSONDecodeError):
            where = f" at line {exc.lineno} column {exc.colno}"
            exc = ValueError(exc.msg)
        raise CLIError(
            f"{path} is not valid JSON ({exc}{where}); nothing was written. Fix it, or add the "
            f"entry by hand: {snippet}"
        ) from None
    if not isinstance(found, dict):
        raise CLIError(
            f"{path} holds a JSON {type(found).__name__}, not an object; nothing was written. "
            f"Fix it, or add the entry by hand: {snippet}"
        )
    return found


def _servers(config: dict[str, Any], keys: tuple[str, ...], path: Path) -> dict[str, Any]:
    """The object at ``keys``, created when absent; CLIError when something else is there."""
    place = config
    for depth, key in enumerate(keys):
        found = place.setdefault(key, {})
        if not isinstance(found, dict):
            at = ".".join(keys[: depth + 1])
            raise CLIError(
                f"{path}: {at} is a JSON {type(found).__name__}, not an object of servers; "
                "nothing was written. Fix it and run install again"
            )
        place = found
    return place


def _write(path: Path, config: dict[str, Any], private: bool) -> None:
    """Replace ``path`` whole with ``config``: a draft beside it, renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o600 if private else None
    descriptor, draft = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            json.dump(config, file, indent=2, ensure_ascii=False)
            file.write("\n")
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(draft, mode)
        os.replace(draft, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(draft)
        raise


def _tilde(path: Path) -> str:
    with contextlib.suppress(ValueError):
        return "~/" + path.relative_to(_home()).as_posix()
    return str(path)


def install(args: argparse.Namespace) -> int:
    if args.host == PRINTED:
        if args.scope is not None:
            raise CLIError("mcp-json prints the entry and writes no file: it takes no --scope")
        found = launch(args.target, args.name, args.env)
        entry = _plain(found.command, found.args, found.env)
        if found.note:
            print(f"note: {found.note}", file=sys.stderr)
        print(json.dumps({"mcpServers": {found.name: entry}}, indent=2, ensure_ascii=False))
        return 0
    host = HOSTS[args.host]
    scope = args.scope or host.default_scope
    if scope not in host.scopes:
        raise CLIError(
            f"--scope {scope}: {host.title} has the scopes {', '.join(host.scopes)} "
            f"({host.default_scope} unless told)"
        )
    destination = host.scopes[scope]()
    found = launch(args.target, args.name, args.env)
    entry = host.entry(found.command, found.args, found.env)
    snippet = json.dumps({destination.keys[-1]: {found.name: entry}}, ensure_ascii=False)
    config = _read(destination.path, snippet)
    servers = _servers(config, destination.keys, destination.path)
    shown = _tilde(destination.path)
    if found.note:
        print(f"note: {found.note}")
    if servers.get(found.name) == entry:
        print(f"unchanged: {shown} already has {found.name!r} as given ({destination.label})")
        return 0
    verb = "updated" if found.name in servers else "added"
    servers[found.name] = entry
    _write(destination.path, config, private=bool(found.env))
    print(f"{verb} {found.name!r} in {shown} ({destination.label})")
    print(f"  it runs: {' '.join([found.command, *found.args])}")
    if found.env:
        print(f"  with: {', '.join(sorted(found.env))}")
    print(f"  next: {destination.then}")
    return 0


INSTALL_EPILOG = """\
Where each host keeps its servers (--scope picks one; the first is the default):
  claude-desktop  Claude/claude_desktop_config.json in the app settings folder (mcpServers)
  claude-code     local: ~/.claude.json, under this directory's project (as `claude mcp add`)
                  user: ~/.claude.json (mcpServers)   project: ./.mcp.json (mcpServers)
  cursor          user: ~/.cursor/mcp.json   project: ./.cursor/mcp.json (mcpServers)
  vscode          project: ./.vscode/mcp.json   user: Code/User/mcp.json (servers)
  mcp-json        writes nothing: prints {"mcpServers": {...}} for any other host

The entry starts `python -m engine serve /absolute/FILE.py --stdio` with this interpreter.
A second run with the same arguments changes nothing.

examples:
  python -m engine install claude-desktop server.py
  python -m engine install claude-code server.py:build --scope user --env API_KEY=...
  python -m engine install mcp-json server.py > mcp.json"""


def add_command(command: Callable[..., argparse.ArgumentParser]) -> None:
    """The ``install`` subcommand; ``command`` makes a subparser as :func:`build_parser` does."""
    parser = command(
        "install", "add FILE.py[:ATTR] to an MCP host's configuration (stdio)", INSTALL_EPILOG
    )
    parser.add_argument("host", metavar="HOST", choices=HOST_NAMES, help=", ".join(HOST_NAMES))
    parser.add_argument("target", help="the server file, optionally :ATTR naming the MCPServer")
    parser.add_argument(
        "--name", help="the server's name in the host (default: the MCPServer's name)"
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a variable the host sets for the server (repeatable; written into the file)",
    )
    parser.add_argument("--scope", help="which of the host's files (see below)")
    parser.set_defaults(func=install)
