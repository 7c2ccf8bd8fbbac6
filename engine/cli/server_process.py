"""A server process of a supervisor (:mod:`engine.cli.supervisor`): one of ``serve --workers``,
or the one ``serve --reload`` and ``dev`` start again on every change to the code.

It serves the server file on the listening socket its supervisor holds (passed as a file
descriptor), so a restart refuses no connection: one that arrives while the next process starts
waits in the socket's backlog. Asked to (``--report``), it first reports the Python files it
imported from outside the interpreter's own directories, with their modification times, so the
reloader watches exactly the user's code. It ends itself when its supervisor is gone (the read
end of a pipe whose write end only the supervisor holds reaches end-of-file).

Run as ``python -m engine.cli.server_process``; not a command for users.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import sys
import sysconfig
import threading
from pathlib import Path

from engine._internal import logs
from engine.cli.shared import CLIError, load_server

DEV_KEEP_ALIVE = 1
"""Seconds an idle keep-alive connection stays open: a replaced process's drain waits for its
idle connections, and a developer's next request should reach the new code at once."""
DEV_DRAIN_TIMEOUT = 2.0
"""Seconds a replaced process gives its requests in flight (a stream held open, say), unless
``ENGINE_DRAIN_TIMEOUT`` says otherwise."""


def interpreter_directories() -> list[Path]:
    """Where the standard library and installed packages live: never the user's code."""
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    found.update(sysconfig.get_paths().values())
    return [Path(path).resolve() for path in found if path]


def imported_files(target: Path) -> dict[str, tuple[int, int]]:
    """Each imported ``.py`` file outside the interpreter's directories (and the target itself),
    with its ``(mtime_ns, size)`` as this process saw it."""
    skipped = interpreter_directories()
    files = {target}
    for module in list(sys.modules.values()):
        name = getattr(module, "__file__", None)
        if not name or not name.endswith(".py"):
            continue
        path = Path(name).resolve()
        if not any(path.is_relative_to(directory) for directory in skipped):
            files.add(path)
    seen: dict[str, tuple[int, int]] = {}
    for path in files:
        with contextlib.suppress(OSError):
            status = path.stat()
            seen[str(path)] = (status.st_mtime_ns, status.st_size)
    return seen


def failure_files(failure: BaseException) -> set[Path]:
    """The user's files an import that raised ``failure`` depends on, and that a module which
    failed to import left out of ``sys.modules``: the files of its traceback, the file a
    ``SyntaxError`` names, and where a missing module would be (``helper.py`` or
    ``helper/__init__.py`` beside the user's code), so that writing any of them starts the
    server again."""
    skipped = interpreter_directories()
    found: set[Path] = set()
    frame = failure.__traceback__
    while frame is not None:
        found.add(Path(frame.tb_frame.f_code.co_filename))
        frame = frame.tb_next
    if isinstance(failure, SyntaxError) and failure.filename:
        found.add(Path(failure.filename))
    if isinstance(failure, ModuleNotFoundError) and failure.name:
        relative = Path(*failure.name.split("."))
        for entry in sys.path:
            folder = Path(entry or ".").resolve()
            if not any(folder.is_relative_to(directory) for directory in skipped):
                found.update((folder / f"{relative}.py", folder / relative / "__init__.py"))
    resolved = {path.resolve() for path in found if path.suffix == ".py"}
    return {path for path in resolved if not any(path.is_relative_to(d) for d in skipped)}


def report(path: str, target: Path, failure: BaseException | None = None) -> None:
    """Write the files to watch: ``{path: [mtime_ns, size]}``, ``null`` for one not there yet."""
    seen: dict[str, tuple[int, int] | None] = dict(imported_files(target))
    for missing in failure_files(failure) if failure is not None else ():
        try:
            status = missing.stat()
        except OSError:
            seen.setdefault(str(missing), None)
        else:
            seen.setdefault(str(missing), (status.st_mtime_ns, status.st_size))
    draft = f"{path}.{os.getpid()}"
    with open(draft, "w", encoding="utf-8") as file:
        json.dump(seen, file)
    os.replace(draft, path)


def end_with_supervisor(descriptor: int) -> None:
    """SIGTERM this process once ``descriptor`` (a pipe's read end) reaches end-of-file."""

    def wait() -> None:
        with contextlib.suppress(OSError):
            while os.read(descriptor, 1):
                pass
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=wait, name="supervisor-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.cli.server_process")
    parser.add_argument("target")
    parser.add_argument("--fd", type=int, required=True, help="the listening socket")
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--report", help="where to write the imported files")
    parser.add_argument("--supervisor-fd", type=int, required=True)
    parser.add_argument("--dev", action="store_true", help="short keep-alive and drain")
    parser.add_argument("--traceback", action="store_true")
    args = parser.parse_args(argv)
    end_with_supervisor(args.supervisor_fd)
    logs.configure(logs.log_format(), "INFO")
    target = Path(args.target.partition(":")[0]).resolve()
    try:
        server = load_server(args.target, traceback=args.traceback)
    except CLIError as exc:
        if args.report:  # a fix in an imported module starts it again too
            report(args.report, target, exc.__context__)
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    if args.report:
        report(args.report, target)
    listener = socket.socket(fileno=args.fd)
    if args.dev:
        drain = None if os.environ.get("ENGINE_DRAIN_TIMEOUT") else DEV_DRAIN_TIMEOUT
        server.run(
            "streamable-http",
            host=args.host,
            port=args.port,
            sockets=[listener],
            drain_timeout=drain,
            uvicorn_options={"timeout_keep_alive": DEV_KEEP_ALIVE},
        )
    else:
        server.run("streamable-http", host=args.host, port=args.port, sockets=[listener])
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C in the terminal while the file was being imported
        sys.exit(130)
