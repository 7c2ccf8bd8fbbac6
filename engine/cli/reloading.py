"""Serving a file again each time its code changes: ``serve --reload`` and ``dev``.

This process binds the listening socket once and keeps it; each version of the code runs in a
fresh interpreter (:mod:`engine.cli.reload_worker`) serving on that socket. On a change the old
process is told to stop (SIGTERM: it finishes the requests it has, within two seconds) and the
new one starts at once, so connections made meanwhile wait in the backlog instead of being
refused, and a call in several rounds goes on in the new process as it would on another replica.

Changes are found by polling the files' modification times (no dependency, works on every file
system, a few hundred ``stat`` calls a second at most): the server file and every Python file the
running process imported from outside the interpreter's own directories.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from engine.cli.shared import CLIError

log = logging.getLogger("engine.cli")

POLL_SECONDS = 0.2
"""How often the watched files are looked at."""
STOP_SECONDS = 10.0
"""How long a stopping server process may take before it is killed."""

Signature = tuple[int, int]
"""A file's ``(mtime_ns, size)``."""


def check_platform() -> None:
    if os.name != "posix":
        raise CLIError(
            "reloading passes the listening socket to each new server process, which needs "
            "Linux or macOS; on Windows run `serve` and start it again after a change"
        )


def listen(host: str, port: int) -> socket.socket:
    """The socket every server process serves on, bound and listening; CLIError when it cannot
    be (the same words as ``serve``'s)."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise CLIError(
            f"cannot listen on {host} port {port} ({exc.strerror or exc}); check --host (an "
            "address of this machine, or 0.0.0.0)"
        ) from None
    family, kind, proto, _, address = found[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise CLIError(
                f"port {port} on {host} is in use; stop the server listening there or serve on "
                "another with --port N"
            ) from None
        raise CLIError(
            f"cannot listen on {host} port {port} ({exc.strerror or exc}); check --host (an "
            "address of this machine, or 0.0.0.0) and --port (below 1024 needs privileges)"
        ) from None
    return sock


def endpoint(sock: socket.socket, host: str) -> str:
    """The ``/mcp`` URL a client on this machine uses for ``sock``."""
    port = sock.getsockname()[1]
    shown = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/mcp"


@contextlib.contextmanager
def stop_requested() -> Iterator[threading.Event]:
    """An event set by SIGINT (Ctrl-C) or SIGTERM, the handlers restored afterwards."""
    stop = threading.Event()

    def handle(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def signature(path: str) -> Signature | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return (status.st_mtime_ns, status.st_size)


class Reloader:
    """The server processes of one target, one current and those still stopping."""

    def __init__(self, target: str, sock: socket.socket, host: str, *, traceback: bool) -> None:
        self.target = target
        self.path = str(Path(target.partition(":")[0]).resolve())
        self.sock = sock
        self.host = host
        self.traceback = traceback
        self.folder = tempfile.TemporaryDirectory(prefix="engine-reload-")
        self.report = os.path.join(self.folder.name, "imported.json")
        # The workers read this pipe; it ends when this process does, and so do they.
        self.alive_read, self.alive_write = os.pipe()
        self.current: subprocess.Popen[bytes] | None = None
        self.stopping: list[subprocess.Popen[bytes]] = []
        self.watched: dict[str, Signature | None] = {}
        self.reported: int | None = None
        self.exit_told = False

    def __enter__(self) -> Reloader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the server processes ---------------------------------------------------------------

    def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.report)
        self.reported = None
        self.exit_told = False
        self.watched = {self.path: signature(self.path)}
        command = [
            sys.executable,
            "-m",
            "engine.cli.reload_worker",
            self.target,
            "--fd",
            str(self.sock.fileno()),
            "--host",
            self.host,
            "--port",
            str(self.sock.getsockname()[1]),
            "--report",
            self.report,
            "--supervisor-fd",
            str(self.alive_read),
        ]
        if self.traceback:
            command.append("--traceback")
        self.current = subprocess.Popen(
            command, pass_fds=(self.sock.fileno(), self.alive_read), stdin=subprocess.DEVNULL
        )

    def restart(self, changed: str) -> None:
        log.info("%s changed: serving the new code", _shown(changed))
        if self.current is not None:
            self._terminate(self.current)
            self.stopping.append(self.current)
        self.start()

    def _terminate(self, process: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)

    def close(self) -> None:
        """Stop every server process (SIGTERM, then SIGKILL after ``STOP_SECONDS``)."""
        processes = [*self.stopping, *([self.current] if self.current else [])]
        for process in processes:
            if process.poll() is None:
                self._terminate(process)
        for process in processes:
            try:
                process.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                log.warning(
                    "server process %d did not stop within %gs: killed", process.pid, STOP_SECONDS
                )
                process.kill()
                process.wait()
        self.current = None
        self.stopping = []
        for descriptor in (self.alive_read, self.alive_write):
            with contextlib.suppress(OSError):
                os.close(descriptor)
        self.folder.cleanup()

    # --- watching ----------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Serve, restarting on each change, until ``stop`` is set."""
        self.start()
        while not stop.wait(POLL_SECONDS):
            self.stopping = [process for process in self.stopping if process.poll() is None]
            self._read_report()
            self._tell_exit()
            changed = self._changed()
            if changed is not None:
                self.restart(changed)

    def _read_report(self) -> None:
        status = signature(self.report)
        if status is None or status[0] == self.reported:
            return
        try:
            with open(self.report, encoding="utf-8") as file:
                seen: dict[str, Any] = json.load(file)
        except (OSError, ValueError):
            return
        self.reported = status[0]
        for path, (mtime, size) in seen.items():
            if path == self.path and self.watched.get(path) is not None:
                continue  # as this process saw it before starting the worker: an earlier look
            self.watched[path] = (int(mtime), int(size))

    def _changed(self) -> str | None:
        for path, before in self.watched.items():
            if signature(path) != before:
                return path
        return None

    def _tell_exit(self) -> None:
        process = self.current
        if process is None or self.exit_told or process.poll() is None:
            return
        self.exit_told = True
        log.warning(
            "the server process exited (status %s); it starts again when %s or a file it "
            "imports changes",
            process.returncode,
            _shown(self.path),
        )


def _shown(path: str) -> str:
    """``path`` relative to the current directory when it lies under it."""
    with contextlib.suppress(ValueError):
        relative = os.path.relpath(path)
        if not relative.startswith(os.pardir):
            return relative
    return path
