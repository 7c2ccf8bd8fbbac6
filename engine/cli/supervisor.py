"""Server processes on one listening socket, held by a supervisor: ``serve --reload``, ``dev``
and ``serve --workers``.

The supervisor binds the socket once and keeps it; each server process is a fresh interpreter
(:mod:`engine.cli.server_process`) that serves on it, passed as a file descriptor. A process
replaced or restarted refuses no connection meanwhile: connections wait in the socket's backlog,
and several processes serving at once share its connections as the kernel hands them out. What
varies is the policy around the processes: the reloader replaces its one process when the code
changes (:mod:`engine.cli.reloading`), the workers keep N running (:mod:`engine.cli.workers`).

Every server process reads a pipe whose write end only the supervisor holds: when the supervisor
is gone, however it ended (``SIGKILL`` included), the pipe reaches end-of-file and each process
drains and exits, so none outlives it.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from types import FrameType

from engine.cli.shared import CLIError

log = logging.getLogger("engine.cli")

POLL_SECONDS = 0.2
"""How often a supervisor looks at its processes (and the reloader at the watched files)."""


def check_platform(feature: str, instead: str) -> None:
    """CLIError where a listening socket cannot be passed to another process (Windows):
    ``feature`` names what needs it, ``instead`` what to do there."""
    if os.name != "posix":
        raise CLIError(
            f"{feature} passes the listening socket to each server process, which needs Linux "
            f"or macOS; on Windows {instead}"
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


def exit_status(code: int) -> str:
    """A process's exit as a person reads it: ``status 2``, or ``killed by SIGKILL``."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"status {code}"


class ServerProcesses:
    """The server processes of one supervisor: each serves ``target`` on ``sock``.

    ``stop_seconds``: how long a stopping process may drain before it is killed. ``dev``: the
    processes serve as ``dev`` wants (short keep-alive and drain, so a replaced one goes
    quickly); otherwise as ``serve`` does.
    """

    def __init__(
        self,
        target: str,
        sock: socket.socket,
        host: str,
        *,
        traceback: bool,
        stop_seconds: float,
        dev: bool = False,
    ) -> None:
        self.target = target
        self.sock = sock
        self.host = host
        self.traceback = traceback
        self.stop_seconds = stop_seconds
        self.dev = dev
        # The processes read this pipe; it ends when this process does, and so do they.
        self.alive_read, self.alive_write = os.pipe()
        self.started: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> ServerProcesses:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(
        self, *, report: str | None = None, environ: Mapping[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """A new server process; ``report``: where it writes the files it imported;
        ``environ``: variables of its own (its ``ENGINE_REPLICA_ID``, say)."""
        command = [
            sys.executable,
            "-m",
            "engine.cli.server_process",
            self.target,
            "--fd",
            str(self.sock.fileno()),
            "--host",
            self.host,
            "--port",
            str(self.sock.getsockname()[1]),
            "--supervisor-fd",
            str(self.alive_read),
        ]
        if report is not None:
            command += ["--report", report]
        if self.dev:
            command.append("--dev")
        if self.traceback:
            command.append("--traceback")
        process = subprocess.Popen(
            command,
            pass_fds=(self.sock.fileno(), self.alive_read),
            stdin=subprocess.DEVNULL,
            env={**os.environ, **environ} if environ else None,
        )
        self.started.append(process)
        return process

    def terminate(self, process: subprocess.Popen[bytes]) -> None:
        """Ask ``process`` to drain and exit (SIGTERM); it is waited for by :meth:`close`."""
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)

    def reap(self) -> None:
        """Forget the processes that have exited (their exit status collected)."""
        self.started = [process for process in self.started if process.poll() is None]

    def close(self) -> None:
        """Stop every server process: SIGTERM, then SIGKILL after ``stop_seconds``."""
        processes, self.started = self.started, []
        for process in processes:
            if process.poll() is None:
                self.terminate(process)
        for process in processes:
            try:
                process.wait(self.stop_seconds)
            except subprocess.TimeoutExpired:
                log.warning(
                    "server process %d did not stop within %gs: killed",
                    process.pid,
                    self.stop_seconds,
                )
                process.kill()
                process.wait()
        for descriptor in (self.alive_read, self.alive_write):
            with contextlib.suppress(OSError):
                os.close(descriptor)
