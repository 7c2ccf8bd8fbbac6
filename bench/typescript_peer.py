"""The TypeScript SDK v2 peer of the bench: its packages and a node to run it, pinned and cached.

``bench/servers/typescript/`` holds the server (``server.mjs``), its ``package.json`` and the
``package-lock.json`` that pins every package it loads. ``npm ci`` installs them into a folder
under ``$ENGINE_BENCH_CACHE`` (default ``~/.cache/engine-bench``) named after the lock file's
hash, and the server is copied there so that its imports resolve against that
``node_modules`` (ES modules ignore ``NODE_PATH``). The node that runs it is the npm package
``node-linux-<arch>`` at ``NODE_VERSION`` (a node binary shipped as an npm package, so the peer
does not run on whatever node the machine has), in a folder of its own beside. Only the first
run downloads anything.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "servers" / "typescript"
NODE_VERSION = "22.23.5"
"""``node-linux-<arch>``: the node that runs the peer (the interop tests' node)."""
SERVER_PACKAGE = "@modelcontextprotocol/server"
INSTALL_TIMEOUT = 600.0


def locked_versions() -> dict[str, str]:
    """Every package ``package-lock.json`` pins, by name."""
    packages = json.loads((SOURCE / "package-lock.json").read_text())["packages"]
    return {
        name.removeprefix("node_modules/"): entry["version"]
        for name, entry in packages.items()
        if name.startswith("node_modules/")
    }


SERVER_VERSION = locked_versions()[SERVER_PACKAGE]


class PeerUnavailable(Exception):
    """The peer could not be installed here (no npm, no registry, no node for this machine)."""


@dataclass(frozen=True)
class TypeScriptPeer:
    node: Path
    server: Path
    versions: dict[str, str]
    """``node`` and every package of the lock file, by name."""

    @property
    def argv(self) -> list[str]:
        """What the bench runs (it adds ``--port N``)."""
        return [str(self.server)]


def cache_root() -> Path:
    configured = os.environ.get("ENGINE_BENCH_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "engine-bench"


def node_arch() -> str | None:
    return {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower()
    )


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """One installer at a time per cache entry (benches of several checkouts share it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _npm(argv: list[str], cwd: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise PeerUnavailable(
            "npm is not on PATH: install Node.js and npm, or pass --no-typescript"
        )
    command = [npm, *argv, "--no-audit", "--no-fund", "--loglevel=error"]
    try:
        done = subprocess.run(
            command,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PeerUnavailable(f"`{' '.join(command)}` did not finish: {exc}") from exc
    if done.returncode != 0:
        raise PeerUnavailable(
            f"`{' '.join(command)}` exited {done.returncode}:\n{done.stderr.strip()[-2000:]}"
        )


def _install_node(arch: str) -> Path:
    name = f"node-{NODE_VERSION}-{arch}"
    prefix = cache_root() / name
    node = prefix / "node_modules" / f"node-linux-{arch}" / "bin" / "node"
    with locked(cache_root() / f"{name}.lock"):
        if not (prefix / ".installed").exists():
            shutil.rmtree(prefix, ignore_errors=True)
            prefix.mkdir(parents=True)
            (prefix / "package.json").write_text('{"name": "engine-bench-node", "private": true}\n')
            _npm(["install", "--save-exact", f"node-linux-{arch}@{NODE_VERSION}"], prefix)
            (prefix / ".installed").write_text(NODE_VERSION + "\n")
    if not node.is_file():
        raise PeerUnavailable(f"{node} is missing after the install")
    return node


def _install_packages() -> Path:
    lock = (SOURCE / "package-lock.json").read_bytes()
    manifest = (SOURCE / "package.json").read_bytes()
    digest = hashlib.sha256(manifest + lock).hexdigest()[:12]
    name = f"typescript-peer-{digest}"
    prefix = cache_root() / name
    with locked(cache_root() / f"{name}.lock"):
        if not (prefix / ".installed").exists():
            shutil.rmtree(prefix, ignore_errors=True)
            prefix.mkdir(parents=True)
            (prefix / "package.json").write_bytes(manifest)
            (prefix / "package-lock.json").write_bytes(lock)
            _npm(["ci"], prefix)
            (prefix / ".installed").write_text(digest + "\n")
    return prefix


def ensure_typescript_peer() -> TypeScriptPeer:
    """The installed peer; ``PeerUnavailable`` says why there is none."""
    arch = node_arch()
    if arch is None or not sys.platform.startswith("linux"):
        raise PeerUnavailable(
            f"no pinned node for {sys.platform}/{platform.machine()}: pass --no-typescript"
        )
    node = _install_node(arch)
    prefix = _install_packages()
    server = prefix / "server.mjs"
    source = SOURCE / "server.mjs"
    if not server.exists() or server.read_bytes() != source.read_bytes():
        shutil.copyfile(source, server)
    return TypeScriptPeer(node, server, {"node": NODE_VERSION, **locked_versions()})


if __name__ == "__main__":
    peer = ensure_typescript_peer()
    print(f"{peer.node} {peer.server}")
    print(json.dumps(peer.versions, indent=1))
