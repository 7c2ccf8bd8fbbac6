"""Real MCP clients for the interop tests, pinned and cached.

Node clients come from the npm registry into one prefix per set of versions, together with a
pinned node binary (the ``node-linux-<arch>`` package, as ``../shared/tools/run-conformance.sh``
does: the Inspector needs node >= 22.19 and the system one may be older). The ``mcp`` 1.x client
gets its own virtualenv, installed with pip. Both live under ``$ENGINE_INTEROP_CACHE`` (default
``~/.cache/engine-interop``), keyed by version, so only the first run downloads anything.

When a client cannot be installed (no npm, no registry), its tests skip, unless
``ENGINE_REQUIRE_INTEROP`` is set (CI sets it): then they fail with the installer's output.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

INSPECTOR_VERSION = "2.12.0"
"""``@modelcontextprotocol/inspector``: its ``--cli`` mode."""
TS_CLIENT_VERSION = "2.4.0"
"""``@modelcontextprotocol/client``: the TypeScript SDK's v2 client."""
TS_TASKS_VERSION = "0.2.2"
"""``@modelcontextprotocol/ext-tasks``: the Tasks extension's client, on top of that one."""
NODE_VERSION = "22.23.5"
"""``node-linux-<arch>``: the node binary that runs both."""
MCP1_VERSION = "1.30.0"
"""``mcp``: the newest 1.x Python SDK (the venv's own ``mcp`` is 2.3.0)."""

INSTALL_TIMEOUT = 600.0
HERE = Path(__file__).resolve().parent


def cache_root() -> Path:
    configured = os.environ.get("ENGINE_INTEROP_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "engine-interop"


def required() -> bool:
    return bool(os.environ.get("ENGINE_REQUIRE_INTEROP"))


def unavailable(what: str, detail: str) -> NoReturn:
    """Skip, or fail when the interop clients are required."""
    cannot_run(f"{what} could not be installed: {detail.strip()[-3000:]}")


def cannot_run(message: str) -> NoReturn:
    """Skip a test this machine cannot run (no registry, no unprivileged user), or fail it when
    ``ENGINE_REQUIRE_INTEROP`` is set, as CI does: there a skip would hide a test not run."""
    if required():
        pytest.fail(
            message + "\n(ENGINE_REQUIRE_INTEROP is set, so this fails instead of skipping)"
        )
    pytest.skip(message)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """One installer at a time per cache entry (parallel runs share the cache)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run_installer(argv: list[str], cwd: Path, what: str) -> None:
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
        )
    except subprocess.TimeoutExpired as exc:
        unavailable(
            what, f"`{' '.join(argv)}` timed out after {INSTALL_TIMEOUT:.0f}s: {exc.stderr}"
        )
    except OSError as exc:
        unavailable(what, f"`{argv[0]}` could not run: {exc}")
    else:
        if done.returncode != 0:
            unavailable(what, f"`{' '.join(argv)}` exited {done.returncode}:\n{done.stderr}")


@dataclass(frozen=True)
class NodeClients:
    prefix: Path
    node: Path

    @property
    def inspector(self) -> list[str]:
        """argv prefix of the Inspector CLI (its launcher, run by the pinned node)."""
        launcher = self.prefix / "node_modules/@modelcontextprotocol/inspector/clients/launcher"
        return [str(self.node), str(launcher / "build/index.js"), "--cli"]

    def script(self, name: str) -> Path:
        """A node script from this folder, copied into the prefix so that its imports resolve
        against the pinned ``node_modules`` (ES modules ignore ``NODE_PATH``)."""
        target = self.prefix / name
        source = HERE / name
        if not target.exists() or target.read_bytes() != source.read_bytes():
            shutil.copyfile(source, target)
        return target


def node_arch() -> str | None:
    return {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower()
    )


def install_node_clients() -> NodeClients:
    what = "the node MCP clients (npm)"
    arch = node_arch()
    if arch is None or not sys.platform.startswith("linux"):
        unavailable(what, f"no pinned node binary for {sys.platform}/{platform.machine()}")
    packages = [
        f"node-linux-{arch}@{NODE_VERSION}",
        f"@modelcontextprotocol/inspector@{INSPECTOR_VERSION}",
        f"@modelcontextprotocol/client@{TS_CLIENT_VERSION}",
        f"@modelcontextprotocol/ext-tasks@{TS_TASKS_VERSION}",
    ]
    name = (
        f"npm-node{NODE_VERSION}-inspector{INSPECTOR_VERSION}-client{TS_CLIENT_VERSION}"
        f"-tasks{TS_TASKS_VERSION}"
    )
    prefix = cache_root() / name
    node = prefix / f"node_modules/node-linux-{arch}/bin/node"
    clients = NodeClients(prefix, node)
    stamp = prefix / ".installed"
    with locked(cache_root() / f"{name}.lock"):
        if not stamp.exists():
            npm = shutil.which("npm")
            if npm is None:
                unavailable(what, "npm is not on PATH")
            shutil.rmtree(prefix, ignore_errors=True)
            prefix.mkdir(parents=True)
            (prefix / "package.json").write_text('{"name": "engine-interop", "private": true}\n')
            _run_installer(
                [
                    npm,
                    "install",
                    "--save-exact",
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                    *packages,
                ],
                prefix,
                what,
            )
            stamp.write_text("\n".join(packages) + "\n")
    if not node.is_file():
        unavailable(what, f"{node} is missing after the install")
    return clients


def install_mcp1() -> Path:
    """The python of a virtualenv holding ``mcp`` 1.x."""
    what = f"mcp=={MCP1_VERSION} (pip)"
    tag = f"py{sys.version_info.major}{sys.version_info.minor}"
    name = f"{tag}-mcp{MCP1_VERSION}"
    venv = cache_root() / name
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    with locked(cache_root() / f"{name}.lock"):
        if not stamp.exists():
            shutil.rmtree(venv, ignore_errors=True)
            _run_installer([sys.executable, "-m", "venv", str(venv)], cache_root(), what)
            _run_installer(
                [
                    str(python),
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--disable-pip-version-check",
                    f"mcp=={MCP1_VERSION}",
                ],
                cache_root(),
                what,
            )
            stamp.write_text(f"mcp=={MCP1_VERSION}\n")
    return python
