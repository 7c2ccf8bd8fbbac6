"""The official MCP Inspector for ``dev --inspector``: pinned, fetched once from npm, run by node.

The Inspector is a node program (``@modelcontextprotocol/inspector``) needing node 22.19 or
newer. It is installed with the user's ``npm`` into this user's cache directory, once per
version; when the ``node`` on PATH is older (or missing), a pinned node binary is installed
beside it from npm too (the ``node-<os>-<arch>`` package). Its web UI is started against the
server's URL in a process group of its own, so that stopping it stops whatever it started.
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from engine.cli.shared import APP_NAME, CLIError

log = logging.getLogger("engine.cli")

INSPECTOR_VERSION = "2.12.0"
"""``@modelcontextprotocol/inspector``, as the interop tests pin it."""
NODE_VERSION = "22.23.5"
"""The node binary installed when the system's is too old for the Inspector."""
NODE_NEEDED = (22, 19, 0)
INSTALL_TIMEOUT = 600.0
STOP_SECONDS = 5.0
HIDDEN_ENV = ("ENGINE_KEYS", "ENGINE_TOKEN")
"""The server's secrets are none of the Inspector's business."""


def user_cache_dir() -> Path:
    """This user's cache directory for this package: ``$XDG_CACHE_HOME`` (when absolute) or
    ``~/.cache`` on Linux, ``~/Library/Caches`` on macOS, ``%LOCALAPPDATA%`` on Windows."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA", "").strip() or os.path.expanduser("~\\AppData\\Local")
        return Path(base) / APP_NAME / "Cache"
    if sys.platform == "darwin":
        return Path(os.path.expanduser("~/Library/Caches")) / APP_NAME
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = xdg if os.path.isabs(xdg) else os.path.expanduser("~/.cache")
    return Path(base) / APP_NAME


def _version(text: str) -> tuple[int, ...] | None:
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    return tuple(int(part) for part in found.groups()) if found else None


def _system_node() -> str | None:
    """The ``node`` on PATH when it is new enough for the Inspector."""
    node = shutil.which("node")
    if node is None:
        return None
    try:
        done = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = _version(done.stdout)
    return node if found is not None and found >= NODE_NEEDED else None


def _node_package() -> str:
    """The npm package of a pinned node binary for this machine; CLIError when there is none."""
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower()
    )
    system = {"linux": "linux", "darwin": "darwin"}.get(sys.platform)
    if arch is None or system is None:
        raise CLIError(
            f"the MCP Inspector needs node {'.'.join(map(str, NODE_NEEDED))} or newer on PATH "
            f"(none is packaged for {sys.platform}/{platform.machine()}); install it, or run "
            "dev without --inspector"
        )
    return f"node-{system}-{arch}"


@contextlib.contextmanager
def _ok(step: str) -> Iterator[None]:
    try:
        yield
    except subprocess.TimeoutExpired:
        raise CLIError(f"{step} timed out after {INSTALL_TIMEOUT:.0f}s; try again") from None


def install() -> list[str]:
    """The command that runs the Inspector's launcher, installing it first when needed."""
    node = _system_node()
    packages = [f"@modelcontextprotocol/inspector@{INSPECTOR_VERSION}"]
    name = f"inspector-{INSPECTOR_VERSION}"
    node_package = None
    if node is None:
        node_package = _node_package()
        packages.append(f"{node_package}@{NODE_VERSION}")
        name += f"-node{NODE_VERSION}"
    folder = user_cache_dir() / name
    if not (folder / ".installed").is_file():
        _npm_install(folder, packages)
    launcher = folder / "node_modules/@modelcontextprotocol/inspector/clients/launcher"
    if node_package is not None:
        node = str(folder / "node_modules" / node_package / "bin" / "node")
    assert node is not None
    return [node, str(launcher / "build" / "index.js")]


def _npm_install(folder: Path, packages: list[str]) -> None:
    """``npm install`` into a draft folder renamed into place: two at once never mix files."""
    npm = shutil.which("npm")
    if npm is None:
        raise CLIError(
            "--inspector runs the MCP Inspector, which is fetched with npm: install Node.js "
            "(with npm), or run dev without --inspector"
        )
    log.info("fetching the MCP Inspector %s from npm into %s (once)", INSPECTOR_VERSION, folder)
    draft = folder.with_name(f"{folder.name}.draft-{os.getpid()}")
    shutil.rmtree(draft, ignore_errors=True)
    draft.mkdir(parents=True)
    try:
        (draft / "package.json").write_text('{"name": "engine-inspector", "private": true}\n')
        command = [npm, "install", "--save-exact", "--no-audit", "--no-fund", "--loglevel=error"]
        with _ok("npm install"):
            done = subprocess.run(
                [*command, *packages],
                cwd=draft,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT,
                check=False,
            )
        if done.returncode != 0:
            said = " ".join(done.stderr.split())[-600:] or f"exit status {done.returncode}"
            raise CLIError(
                f"npm could not install {' '.join(packages)}: {said}; check the network and "
                "npm's registry setting, or run dev without --inspector"
            )
        (draft / ".installed").write_text("\n".join(packages) + "\n")
        try:
            draft.rename(folder)
        except OSError:
            if not (folder / ".installed").is_file():
                shutil.rmtree(folder, ignore_errors=True)
                draft.rename(folder)
    finally:
        shutil.rmtree(draft, ignore_errors=True)


@contextlib.contextmanager
def running_inspector(launcher: list[str], url: str) -> Iterator[subprocess.Popen[bytes]]:
    """The Inspector's web UI (``launcher``, from :func:`install`) pointed at ``url``, until the
    block ends; then its process group is stopped (SIGTERM, then SIGKILL after
    ``STOP_SECONDS``)."""
    command = [*launcher, "--web", "--transport", "http", "--server-url", url]
    env = {key: value for key, value in os.environ.items() if key not in HIDDEN_ENV}
    process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, start_new_session=True)
    stopping = threading.Event()

    def watch() -> None:
        status = process.wait()
        if not stopping.is_set():
            log.warning(
                "the MCP Inspector exited (status %s); the server goes on at %s", status, url
            )

    threading.Thread(target=watch, name="inspector-watch", daemon=True).start()
    try:
        yield process
    finally:
        stopping.set()
        _stop_group(process)


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            continue
        # The launcher is gone; anything it started in its group goes with it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        return
