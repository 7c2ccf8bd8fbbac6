"""What the store fault tests drive: a served bookshop, clients calling it, filesystems to break.

- `served`: ``python -m engine serve examples/bookshop_server.py`` on a store URL, in a process
  of its own; its ``/healthz`` and ``/metrics`` read over HTTP.
- `Load`: clients running 2-round ``order_book`` calls back to back; every call whose last
  round was answered is *acknowledged*, by its call id (results carry it: ENGINE_STAMP_RESULTS).
- `tmpfs` and `Ext4`: a small filesystem mounted under a temporary directory (the tests run as
  root, as CI does); the ext4 one can be shut down as a failing disk is (``FS_IOC_SHUTDOWN``:
  writes fail from then on, and what was not synced is lost), then mounted again.
- `journaled_completions`: which acknowledged calls the journal holds a ``complete`` event for.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from stores import Store
from tests.cli.test_cli import environment
from tests.conftest import KEY
from tests.fleet_helpers import LOOPBACK, ROOT, free_port
from tests.http_helpers import call, headers_for, retry

YES = {"action": "accept", "content": {"confirm": True}}

# --- a served bookshop ------------------------------------------------------------------------


@dataclass
class Served:
    """One ``python -m engine serve`` of the bookshop."""

    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def base(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def health(self) -> tuple[int, str]:
        """``/healthz``: its status, and what it says of the store."""
        try:
            answer = httpx.get(f"{self.base}/healthz", timeout=10)
        except httpx.HTTPError as exc:
            return 0, repr(exc)
        if answer.status_code not in (200, 503):
            return answer.status_code, answer.text
        return answer.status_code, str(answer.json().get("store"))

    def metric(self, name: str) -> float:
        body = httpx.get(f"{self.base}/metrics", timeout=10).text
        return sum(
            float(line.rpartition(" ")[2])
            for line in body.splitlines()
            if line.startswith(name) and not line.startswith("#")
        )

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_health(self, status: int, within: float) -> float:
        """Seconds until ``/healthz`` answers ``status`` (fails the test after ``within``)."""
        started = time.monotonic()
        seen: tuple[int, str] = (0, "")
        while time.monotonic() - started < within:
            seen = self.health()
            if seen[0] == status:
                return time.monotonic() - started
            time.sleep(0.1)
        raise AssertionError(f"/healthz not {status} within {within} s: {seen}\n{self.tail()}")

    def tail(self, chars: int = 3000) -> str:
        return self.log_text()[-chars:]


@contextlib.contextmanager
def served(store: str, log: Path, **env: str) -> Iterator[Served]:
    """The bookshop on ``store`` until the block ends (SIGKILL at the end if it will not stop)."""
    port = free_port()
    argv = [sys.executable, "-m", "engine", "serve", "examples/bookshop_server.py"]
    argv += ["--port", str(port), "--store", store]
    with log.open("ab") as out:
        process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=environment(ENGINE_KEYS=f"k1={KEY}", ENGINE_STAMP_RESULTS="1", **env),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = Served(port, process, log)
    try:
        deadline = time.monotonic() + 30
        while server.health()[0] != 200:
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the server did not start:\n{server.tail()}")
            time.sleep(0.1)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(15)


# --- clients ----------------------------------------------------------------------------------


@dataclass
class Load:
    """Clients calling ``order_book`` back to back while `run` runs."""

    base: str
    clients: int = 8
    acknowledged: list[str] = field(default_factory=list)
    """Call ids of the calls whose final result came back."""
    failed_at: list[float] = field(default_factory=list)
    """When (``time.monotonic()``) a call ended without its result, as a round answered with an
    error (a store outage, say) ends it: the client would retry it."""

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Until cancelled."""
        limits = httpx.Limits(max_connections=self.clients)
        client = httpx.AsyncClient(base_url=self.base, timeout=30, limits=limits)
        async with client, anyio.create_task_group() as tg:
            for _ in range(self.clients):
                tg.start_soon(self._calls, client)
            task_status.started()

    async def _calls(self, client: httpx.AsyncClient) -> None:
        while True:
            try:
                call_id = await self._call(client)
            except httpx.HTTPError:
                call_id = None
            if call_id is None:
                self.failed_at.append(time.monotonic())
                await anyio.sleep(0.05)  # as a client backs off before its retry
            else:
                self.acknowledged.append(call_id)

    async def _call(self, client: httpx.AsyncClient) -> str | None:
        first = call("order_book", {"title": "Neuromancer"}, capabilities={"elicitation": {}})
        result = await _result(client, first)
        if result is None or result.get("resultType") != "input_required":
            return None
        result = await _result(client, retry(result["requestState"]))
        if result is None or result.get("isError") or result.get("resultType") != "complete":
            return None
        call_id = result.get("_meta", {}).get("engine/call")
        return call_id if isinstance(call_id, str) else None

    @contextlib.asynccontextmanager
    async def running(self) -> Any:
        async with anyio.create_task_group() as tg:
            await tg.start(self.run)
            try:
                yield self
            finally:
                tg.cancel_scope.cancel()


async def _result(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any] | None:
    answer = await client.post("/mcp", content=json.dumps(body), headers=headers_for(body))
    if answer.status_code != 200:
        return None
    result = answer.json().get("result")
    return result if isinstance(result, dict) else None


# --- what the store kept ----------------------------------------------------------------------


async def journaled_completions(store: Store, call_ids: list[str]) -> set[str]:
    """The calls among ``call_ids`` whose journal holds their ``complete`` event (its kind is in
    the clear)."""
    found: set[str] = set()
    for call_id in call_ids:
        if any(event.get("kind") == "complete" for event in await store.events(call_id)):
            found.add(call_id)
    return found


# --- filesystems ------------------------------------------------------------------------------


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise OSError(done.stderr.strip() or f"mount {' '.join(args)} failed")


def _unmount(path: Path) -> None:
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _cannot_mount(what: str, exc: OSError) -> None:
    """Skip where mounting is impossible (not root, a container without the capability); CI runs
    as root, where these tests must run, and fail."""
    if os.environ.get("ENGINE_REQUIRE_FAULTS") == "1":
        pytest.fail(f"cannot mount {what}: {exc}", pytrace=False)
    pytest.skip(f"cannot mount {what} here ({exc}); these tests need root, as in CI")


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``5m``) mounted at ``path`` for the block."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))
    except OSError as exc:
        _cannot_mount(f"a tmpfs of {size}", exc)
    try:
        yield path
    finally:
        _unmount(path)


def fill(directory: Path, name: str = "ballast") -> Path:
    """A file that takes all the room left on ``directory``'s filesystem."""
    ballast = directory / name
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (64 * 1024, 1024, 1):
            with contextlib.suppress(OSError):  # ENOSPC: full, at this size
                while os.write(fd, bytes(size)):
                    pass
    finally:
        os.close(fd)
    return ballast


FS_IOC_SHUTDOWN = 0x8004587D
"""``_IOR('X', 125, __u32)``: the filesystem stops, as ext4 does on an I/O error."""
SHUTDOWN_NOLOGFLUSH = 2
"""Without flushing its journal: what was not synced is lost, as in a power loss."""


@dataclass
class Ext4:
    """An ext4 filesystem in a file, loop-mounted at ``mountpoint``."""

    image: Path
    mountpoint: Path

    def mount(self) -> None:
        _mount("-o", "loop", str(self.image), str(self.mountpoint))

    def shut_down(self) -> None:
        """Every write fails from now on; what was written but not synced is lost."""
        fd = os.open(self.mountpoint, os.O_RDONLY)
        try:
            fcntl.ioctl(fd, FS_IOC_SHUTDOWN, SHUTDOWN_NOLOGFLUSH.to_bytes(4, "little"))
        finally:
            os.close(fd)

    def mount_again(self) -> None:
        """As after the machine restarts: unmounted, then mounted (its journal replayed)."""
        _unmount(self.mountpoint)
        self.mount()


@contextlib.contextmanager
def ext4(directory: Path, size_mb: int = 64) -> Iterator[Ext4]:
    if shutil.which("mkfs.ext4") is None:
        pytest.fail("mkfs.ext4 is not installed: apt-get install -y e2fsprogs", pytrace=False)
    image, mountpoint = directory / "disk.img", directory / "disk"
    mountpoint.mkdir(parents=True, exist_ok=True)
    with image.open("wb") as out:
        out.truncate(size_mb * 1024 * 1024)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
    disk = Ext4(image, mountpoint)
    try:
        disk.mount()
    except OSError as exc:
        _cannot_mount("an ext4 image on a loop device", exc)
    try:
        yield disk
    finally:
        _unmount(mountpoint)
