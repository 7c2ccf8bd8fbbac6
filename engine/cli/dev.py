"""``dev`` and ``serve --reload``: serve a file while it is being written.

``dev FILE.py`` is ``serve FILE.py --reload`` with what a developer wants beside it: the
``/mcp`` URL to paste into a client and, with ``--inspector``, the official MCP Inspector's web
UI started against that URL. The store and the keys are the ones ``serve`` uses (the default
store and this user's kept keys unless told otherwise), so the journal commands read the calls
made while developing. Ctrl-C stops the server processes and the Inspector.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
from collections.abc import Callable, Iterator

from engine.cli.reloading import Reloader
from engine.cli.shared import CLIError, serving_environment
from engine.cli.store_reach import reach
from engine.cli.supervisor import check_platform, endpoint, listen, stop_requested

log = logging.getLogger("engine.cli")


def serve_reloading(args: argparse.Namespace, *, inspector: bool = False) -> int:
    """Serve ``args.target`` over HTTP, again after each change, until Ctrl-C or SIGTERM."""
    check_platform("reloading", "run `serve` and start it again after a change")
    if not 0 <= args.port <= 65535:
        raise CLIError(
            f"--port {args.port}: a port is a number from 1 to 65535 (0 picks any free one)"
        )
    if getattr(args, "stdio", False):
        raise CLIError(
            "--reload serves over HTTP: a host that starts the server over stdio starts it "
            "again itself; drop --stdio, or --reload"
        )
    _configure_environment(args)
    launcher = _inspector_command() if inspector else None  # fetched before anything starts
    with (
        stop_requested() as stop,
        contextlib.closing(listen(args.host, args.port)) as sock,
        Reloader(args.target, sock, args.host, traceback=args.traceback) as reloader,
    ):
        url = endpoint(sock, args.host)
        log.info(
            "serving %s at %s; it reloads when the file or a module it imports changes "
            "(Ctrl-C stops)",
            args.target,
            url,
        )
        with _inspector(launcher, url) if launcher else contextlib.nullcontext():
            reloader.run(stop)
    return 0


def _configure_environment(args: argparse.Namespace) -> None:
    """The keys and the store, as ``serve`` chooses them (and refuses them), handed to every
    server process."""
    store, kept = serving_environment(args)
    if store.url is not None:
        reach(store)
    store.announce()
    if kept is not None:
        kept.announce()


def _inspector_command() -> list[str]:
    from engine.cli.inspector import install

    return install()


@contextlib.contextmanager
def _inspector(launcher: list[str], url: str) -> Iterator[None]:
    from engine.cli.inspector import running_inspector

    with running_inspector(launcher, url):
        yield


def dev(args: argparse.Namespace) -> int:
    return serve_reloading(args, inspector=args.inspector)


DEV_EPILOG = """\
The server runs in a process of its own, started again (within a second or so) whenever the file
or a Python module it imports from outside the interpreter's directories changes; the port stays
open meanwhile. Keys and store are serve's: this user's kept keys and the default store unless
--keys-file / --store (or ENGINE_KEYS / ENGINE_STORE) say otherwise.

--inspector fetches the MCP Inspector (pinned, with npm, once, into your cache directory) and
starts its web UI pointed at the server; its own variables (CLIENT_PORT, MCP_AUTO_OPEN_ENABLED...)
pass through. Ctrl-C stops the server and the Inspector.

examples:
  python -m engine dev server.py
  python -m engine dev server.py:build --port 8001 --inspector"""


def add_command(command: Callable[..., argparse.ArgumentParser], *, store_help: str) -> None:
    """The ``dev`` subcommand; ``command`` makes a subparser as :func:`build_parser` does."""
    parser = command(
        "dev",
        "serve FILE.py[:ATTR] with reload on change, optionally with the MCP Inspector",
        DEV_EPILOG,
    )
    parser.add_argument("target", help="the server file, optionally :ATTR naming the MCPServer")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free one (8000)")
    parser.add_argument(
        "--inspector",
        action="store_true",
        help="also start the MCP Inspector's web UI, pointed at the server",
    )
    parser.add_argument("--keys-file", metavar="PATH", help="a file of requestState secrets")
    parser.add_argument("--store", help=store_help)
    parser.add_argument(
        "--traceback",
        action="store_true",
        help="print the traceback when importing FILE.py fails (or ENGINE_TRACEBACK=1)",
    )
    parser.add_argument(
        "--log-format",
        choices=["text", "json"],
        help="log lines as text, or as one JSON object each (or ENGINE_LOG_FORMAT)",
    )
    parser.set_defaults(func=dev, keys=None, replica=None)
