"""``python -m engine ARGS`` run in this process: ``main(ARGS)`` with its own standard streams,
environment, working directory and logging, all put back afterwards.

Starting an interpreter costs a second or more of a loaded machine's CPU per command, and what
most CLI tests check (the lines printed, the exit status) is the command line's logic, which
``main`` runs the same in process. Tests where the process itself is the point (``serve``, a
terminal, signals, the console script) start one.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

from engine.cli.main import main


class _Stdin(io.StringIO):
    """Piped standard input: not a terminal, with no file descriptor, like a closed pipe."""

    def isatty(self) -> bool:
        return False


def run_in_process(
    args: list[str],
    cwd: Path,
    stdin: str = "",
    *,
    environ: Mapping[str, str] | None = None,
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """What ``subprocess.run([python, -m, engine, *args], ...)`` would return: the exit status
    and what was written to stdout and stderr. The environment is ``environ`` (by default this
    one without the ``ENGINE_`` variables), plus ``env``."""
    if environ is None:
        environ = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    out, err = io.StringIO(), io.StringIO()
    with _restored(cwd, {**environ, **env}):
        sys.stdin = _Stdin(stdin)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(list(args))
            except SystemExit as exited:  # argparse's usage errors and --help
                status = _status(exited.code, err)
    return subprocess.CompletedProcess(args, status, out.getvalue(), err.getvalue())


def _status(code: object, err: io.StringIO) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=err)  # as the interpreter prints a SystemExit's message
    return 1


@contextlib.contextmanager
def _restored(cwd: Path, env: Mapping[str, str]) -> Iterator[None]:
    """Everything a command may change in its process, put back as it was: the environment
    (``serve`` exports its settings), the directory, ``sys.path`` and the imported server files
    (``load_server``), standard input, and logging (``main`` configures it, a connection adds
    filters)."""
    environ = dict(os.environ)
    directory = os.getcwd()
    path = list(sys.path)
    modules = dict(sys.modules)
    stdin = sys.stdin
    logs = _logging_state()
    try:
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        yield
    finally:
        sys.stdin = stdin
        os.chdir(directory)
        os.environ.clear()
        os.environ.update(environ)
        added = {str(Path(entry).resolve()) for entry in sys.path if entry not in path}
        sys.path[:] = path
        for name, module in list(sys.modules.items()):
            if name in modules:
                sys.modules[name] = modules[name]
            elif str(Path(getattr(module, "__file__", None) or "/").parent) in added:
                del sys.modules[name]  # a server file, imported from the directory it is in
        _restore_logging(logs)


LoggingState = dict[str, tuple[int, list[logging.Handler], list[object], bool, bool]]


def _logging_state() -> LoggingState:
    loggers = {"": logging.getLogger()}
    for name, logger in logging.Logger.manager.loggerDict.items():
        if isinstance(logger, logging.Logger):
            loggers[name] = logger
    return {
        name: (
            logger.level,
            list(logger.handlers),
            list(logger.filters),
            logger.propagate,
            logger.disabled,
        )
        for name, logger in loggers.items()
    }


def _restore_logging(state: LoggingState) -> None:
    for name, logger in [*logging.Logger.manager.loggerDict.items(), ("", logging.root)]:
        if not isinstance(logger, logging.Logger):
            continue
        level, handlers, filters, propagate, disabled = state.get(name, (0, [], [], True, False))
        for handler in logger.handlers:
            if handler not in handlers:
                handler.close()
        logger.setLevel(level)
        logger.handlers[:] = handlers
        logger.filters[:] = filters  # type: ignore[assignment]
        logger.propagate = propagate
        logger.disabled = disabled
