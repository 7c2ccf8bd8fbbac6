"""A stdio server started from a directory it cannot write to still serves.

MCP hosts launch stdio servers from wherever they happen to run (often a project the user only
reads, or ``/``). The client here is the official Python SDK (``mcp`` 2.3.0), legacy mode: the
``initialize`` handshake, then one tool call. Root ignores directory permissions, so when the
tests run as root the server runs as the unprivileged ``nobody`` (via ``setpriv``), with a
writable HOME of its own, as a real user would have.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.conftest import KEY
from tests.fleet_helpers import ROOT
from tests.interop import clients
from tests.unprivileged import Nobody, as_nobody

pytestmark = [pytest.mark.anyio, pytest.mark.interop]

STEP_TIMEOUT = 30.0
BOOKSHOP = str(ROOT / "examples" / "bookshop_server.py")


def unprivileged() -> tuple[list[str], pwd.struct_passwd | None]:
    """The argv prefix that drops to an unprivileged user, and that user (None: we are one)."""
    if os.geteuid() != 0:
        return [], None
    nobody = as_nobody()
    if not isinstance(nobody, Nobody):
        clients.cannot_run(f"running as root, which ignores directory permissions; {nobody}")
    return nobody.prefix, nobody.user


def private_dir(owner: pwd.struct_passwd | None, mode: int) -> Path:
    path = Path(tempfile.mkdtemp(prefix="engine-interop-"))
    if owner is not None:
        os.chown(path, owner.pw_uid, owner.pw_gid)
    path.chmod(mode)
    return path


@pytest.fixture
def as_user() -> Iterator[tuple[list[str], Path]]:
    """(argv prefix, a writable HOME) for the server's user."""
    drop, user = unprivileged()
    home = private_dir(user, 0o700)
    try:
        yield drop, home
    finally:
        shutil.rmtree(home, ignore_errors=True)
        (home.parent / f"{home.name}.stderr").unlink(missing_ok=True)


@pytest.fixture
def read_only_dir(as_user: tuple[list[str], Path]) -> Iterator[Path]:
    """A directory the server's user can enter and list but not write; checked, not assumed."""
    drop, _ = as_user
    path = private_dir(None, 0o555)
    try:
        probe = subprocess.run(
            [*drop, sys.executable, "-c", "open('probe', 'w')"],
            cwd=path,
            capture_output=True,
            text=True,
            timeout=STEP_TIMEOUT,
        )
        if probe.returncode == 0:
            pytest.fail(f"{path} is writable for the server's user; the test would prove nothing")
        assert "PermissionError" in probe.stderr, probe.stderr
        yield path
    finally:
        path.chmod(0o755)
        shutil.rmtree(path, ignore_errors=True)


async def order_dune_over_stdio(drop: list[str], home: Path, cwd: Path) -> types.CallToolResult:
    command, *args = [*drop, sys.executable, "-m", "engine", "serve", "--stdio", BOOKSHOP]
    server = StdioServerParameters(
        command=command,
        args=args,
        # No ENGINE_STORE: the default store is what is under test.
        env={"HOME": str(home), "PYTHONPATH": str(ROOT), "ENGINE_KEYS": KEY},
        cwd=cwd,
    )
    with (home.parent / f"{home.name}.stderr").open("w") as errlog, anyio.fail_after(STEP_TIMEOUT):
        async with Client(stdio_client(server, errlog=errlog), mode="legacy") as client:
            assert client.protocol_version == "2025-11-25"
            return await client.call_tool("order_book", {"title": "Dune"})


def text_of(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def test_control_a_writable_directory_serves(as_user: tuple[list[str], Path]) -> None:
    """The same launch from a directory the user owns: proves the user can run the server."""
    drop, home = as_user
    cwd = home / "project"
    cwd.mkdir()
    if home.stat().st_uid != os.geteuid():
        os.chown(cwd, home.stat().st_uid, home.stat().st_gid)  # the server's user owns it
    result = await order_dune_over_stdio(drop, home, cwd)
    assert text_of(result) == "Ordered 'Dune'."


async def test_a_read_only_working_directory_serves(
    as_user: tuple[list[str], Path], read_only_dir: Path
) -> None:
    drop, home = as_user
    try:
        result = await order_dune_over_stdio(drop, home, read_only_dir)
    except BaseException:
        print((home.parent / f"{home.name}.stderr").read_text()[-3000:])  # shown on failure
        raise
    assert text_of(result) == "Ordered 'Dune'."
    assert os.listdir(read_only_dir) == []
