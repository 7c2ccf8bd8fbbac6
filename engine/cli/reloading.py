"""Serving a file again each time its code changes: ``serve --reload`` and ``dev``.

The supervisor (:mod:`engine.cli.supervisor`) holds the listening socket; each version of the
code runs in a fresh server process serving on it. On a change the old process is told to stop
(SIGTERM: it finishes the requests it has, within two seconds) and the new one starts at once,
so connections made meanwhile wait in the backlog instead of being refused, and a call in
several rounds goes on in the new process as it would on another replica.

Changes are found by polling the files' modification times (no dependency, works on every file
system, a few hundred ``stat`` calls a second at most): the server file and every Python file the
running process imported from outside the interpreter's own directories.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from engine.cli.supervisor import POLL_SECONDS, ServerProcesses

log = logging.getLogger("engine.cli")

STOP_SECONDS = 10.0
"""How long a stopping server process may take before it is killed."""

Signature = tuple[int, int]
"""A file's ``(mtime_ns, size)``."""


def signature(path: str) -> Signature | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return (status.st_mtime_ns, status.st_size)


class Reloader:
    """The server process of one target, replaced by a new one when its code changes."""

    def __init__(self, target: str, sock: socket.socket, host: str, *, traceback: bool) -> None:
        self.path = str(Path(target.partition(":")[0]).resolve())
        self.processes = ServerProcesses(
            target, sock, host, traceback=traceback, stop_seconds=STOP_SECONDS, dev=True
        )
        self.folder = tempfile.TemporaryDirectory(prefix="engine-reload-")
        self.report = os.path.join(self.folder.name, "imported.json")
        self.current: subprocess.Popen[bytes] | None = None
        self.watched: dict[str, Signature | None] = {}
        self.reported: int | None = None
        self.exit_told = False

    def __enter__(self) -> Reloader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the server process ------------------------------------------------------------------

    def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.report)
        self.reported = None
        self.exit_told = False
        self.watched = {self.path: signature(self.path)}
        self.current = self.processes.start(report=self.report)

    def restart(self, changed: str) -> None:
        log.info("%s changed: serving the new code", _shown(changed))
        if self.current is not None:
            self.processes.terminate(self.current)
        self.start()

    def close(self) -> None:
        """Stop every server process (SIGTERM, then SIGKILL after ``STOP_SECONDS``)."""
        self.processes.close()
        self.current = None
        self.folder.cleanup()

    # --- watching ----------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Serve, restarting on each change, until ``stop`` is set."""
        self.start()
        while not stop.wait(POLL_SECONDS):
            self.processes.reap()
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
        for path, status in seen.items():
            if path == self.path and self.watched.get(path) is not None:
                continue  # as seen before the server process started: an earlier look
            self.watched[path] = None if status is None else (int(status[0]), int(status[1]))

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
