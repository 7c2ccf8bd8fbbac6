"""``python -m engine``: serve a server file, try its tools, and debug its calls from the journal.

What an operator does around a server should be one command away, with no MCP host, notebook or
database client to set up: ``serve`` it, ``call`` a tool and answer its questions at prompts,
list the recorded ``calls``, ``show`` one as a timeline, ``replay`` it against the current code,
``export`` it as a test fixture, ``inspect`` a requestState, ``keygen`` a secret. One entry point
(also the ``engine`` console script); the journal commands read the store ``serve`` writes, so
they default to the same URL.

This module is the parser, ``main``, and the commands around running a server (``serve``,
``call``, ``keygen``); the journal commands are in :mod:`engine.cli.journal`, the terminal client
behind ``call`` in :mod:`engine.cli.terminal_client`.
"""

from __future__ import annotations

import argparse
import math
import os
import secrets
import sys
from typing import Any

from engine import __version__
from engine._internal import logs
from engine._internal.inert import inert, inert_json
from engine.cli import dev, install
from engine.cli import journal as cli_journal
from engine.cli.shared import (
    DEFAULT_STORE_SHOWN,
    TRACEBACK_ENV,
    CLIError,
    held_logs,
    json_object,
    load_server,
    serving_environment,
)
from engine.cli.store_reach import reach
from engine.cli.terminal_client import LOG_LEVELS
from engine.cli.workers import requested_workers, serve_in_workers


def _serve(args: argparse.Namespace) -> int:
    count = requested_workers(args)
    if args.journal_ui and (args.reload or count is not None):
        raise CLIError(
            "--journal-ui is served by a single server process: leave out --reload and "
            "--workers, or run `python -m engine journal-ui` beside the server"
        )
    if args.reload:
        from engine.cli.dev import serve_reloading

        return serve_reloading(args)
    if not 0 <= args.port <= 65535:
        raise CLIError(
            f"--port {args.port}: a port is a number from 1 to 65535 (0 picks any free one)"
        )
    store, kept = serving_environment(args)
    if store.url is not None:
        reach(store)
    if args.stdio and args.journal_ui:
        raise CLIError("--journal-ui is served over HTTP: leave out --stdio")
    if args.stdio:
        server = load_server(args.target, traceback=args.traceback)
        store.announce()
        if kept is not None:
            kept.announce()
        server.run("stdio")
        return 0
    if count is not None:
        return serve_in_workers(args, count, store, kept)
    from engine.transports.serving import CannotListen, check_listenable

    try:
        # The file first, so a mistake in it is the line shown whatever listens on the port;
        # the import's logs wait for the port's check, so a port in use is one line too.
        with held_logs() as held:
            server = load_server(args.target, traceback=args.traceback)
            check_listenable(args.host, args.port)
            held.keep()
        store.announce()
        if kept is not None:
            kept.announce()
        mounts = _journal_mount(server, args) if args.journal_ui else {}
        server.run("streamable-http", host=args.host, port=args.port, mounts=mounts)
    except CannotListen as exc:
        if exc.in_use:
            raise CLIError(
                f"port {exc.port} on {exc.host} is in use; stop the server listening there or "
                "serve on another with --port N"
            ) from None
        raise CLIError(
            f"cannot listen on {exc.host} port {exc.port} ({exc.reason}); check --host (an "
            "address of this machine, or 0.0.0.0) and --port (below 1024 needs privileges)"
        ) from None
    return 0


def _keygen(args: argparse.Namespace) -> int:
    print(secrets.token_hex(32))
    return 0


# --- call --------------------------------------------------------------------------------------


def _call(args: argparse.Namespace) -> int:
    from engine.cli.connections import check_target
    from engine.cli.terminal_client import CallOptions, parse_answer, run_call

    if args.stdio is not None and args.target is not None and args.tool is None:
        args.target, args.tool = None, args.target  # `--stdio CMD TOOL`: no TARGET
    kind, name = _called(args)
    check_target(args.target, args.stdio)
    arguments = json_object(args.json, "--json") if args.json is not None else {}
    answers: dict[str, Any] = {}
    for pair in args.answer:
        try:
            key, value = parse_answer(pair)
        except ValueError as exc:
            raise CLIError(str(exc)) from None
        answers[key] = value
    options = CallOptions(
        url=args.target,
        tool=name,
        kind=kind,
        arguments=arguments,
        raw_arguments=list(args.arg),
        answers=answers,
        max_rounds=_rounds(args.max_rounds),
        timeout=_seconds(args.timeout, "--timeout"),
        stdio=args.stdio,
        log_level=args.log_level,
        traceback=args.traceback,
        token=_token(args),
    )
    return run_call(options)


def _seconds(value: float, option: str) -> float:
    if not math.isfinite(value) or value <= 0:
        raise CLIError(f"{option} {value:g}: give a number of seconds above 0, like 60")
    return value


def _rounds(value: int) -> int:
    if value < 1:
        raise CLIError(f"--max-rounds {value}: give a number of rounds of 1 or more, like 20")
    return value


def _called(args: argparse.Namespace) -> tuple[str, str]:
    """What ``call`` calls: ``("tool", NAME)``, ``("prompt", NAME)`` or ``("resource", URI)``;
    exactly one of TOOL, ``--prompt`` and ``--resource``."""
    given = [
        (kind, value)
        for kind, value in (
            ("tool", args.tool),
            ("prompt", args.prompt),
            ("resource", args.resource),
        )
        if value is not None
    ]
    if len(given) != 1:
        raise CLIError(
            "give what to call: a TOOL name, --prompt NAME or --resource URI (one of them)"
        )
    return given[0]


def _token(args: argparse.Namespace) -> str | None:
    """The bearer token for an HTTP server: ``--token``, else ``ENGINE_TOKEN``."""
    from engine.cli.connections import is_url

    given: str | None = args.token
    if given is not None and not (args.target is not None and is_url(args.target)):
        raise CLIError(
            "--token is for a server reached over HTTP (an http:// or https:// TARGET); stdio "
            "and a server file run here take no token"
        )
    token = given if given is not None else os.environ.get("ENGINE_TOKEN") or None
    if token is not None:
        token = token.strip()
        if token.lower().startswith("bearer "):
            token = token[7:].strip()
        if not token or any(c.isspace() for c in token):
            raise CLIError("the access token is empty or has spaces in it; pass the token alone")
    return token


def _list(args: argparse.Namespace) -> int:
    from engine.cli.connections import open_connection
    from engine.cli.http_session import ProtocolFailure
    from engine.cli.listing import gather, print_listing

    connection = open_connection(
        args.target,
        args.stdio,
        _seconds(args.timeout, "--timeout"),
        traceback=args.traceback,
        token=_token(args),
    )
    try:
        found = gather(connection)
    except ProtocolFailure as exc:
        print(inert(f"error: {exc}"), file=sys.stderr)
        return 2
    finally:
        connection.close()
    if args.json:
        print(inert_json(found, indent=2))
    else:
        print_listing(found)
    return 0


# --- the parser ----------------------------------------------------------------------------------

TARGET_HELP = (
    "the server: its MCP endpoint (http://127.0.0.1:8000/mcp), or a server file "
    "FILE.py[:ATTR] run in this process"
)
STDIO_HELP = "run CMD and speak to the server on its stdin/stdout instead of TARGET"
TOKEN_HELP = (
    "the OAuth access token an HTTP server requires, sent as Authorization: Bearer (or "
    "ENGINE_TOKEN; shown by ps: prefer ENGINE_TOKEN)"
)


DESCRIPTION = """\
Serve an MCP server file, try its tools from the terminal, and debug its calls from the journal.

The journal commands (calls, tasks, show, replay, export, journal-ui) read the store that serve
writes: --store, else ENGINE_STORE, else calls.sqlite3 in your data directory (serve prints
where).
Every command takes --help; see docs/replay.md for a walk-through, and docs/running.md ("When
something is wrong") for what each error line means."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m engine",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mcp-engine {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    store_help = (
        f"the server's store URL (default: ENGINE_STORE, else {DEFAULT_STORE_SHOWN}); "
        "SQLite or Redis"
    )

    def command(name: str, summary: str, epilog: str | None = None) -> argparse.ArgumentParser:
        return commands.add_parser(
            name,
            help=summary,
            description=summary,
            epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    serve = command("serve", "serve FILE.py[:ATTR] over HTTP or stdio")
    serve.add_argument("target", help="the server file, optionally :ATTR naming the MCPServer")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--stdio", action="store_true", help="serve on stdin/stdout instead")
    serve.add_argument(
        "--keys",
        help="comma-separated requestState secrets (shown by ps: prefer --keys-file or "
        "ENGINE_KEYS)",
    )
    serve.add_argument(
        "--keys-file",
        metavar="PATH",
        help="a file of the secrets, comma- or newline-separated, as ENGINE_KEYS holds them "
        "(without any, serve generates one and keeps it in your data directory)",
    )
    serve.add_argument("--replica", help="this replica's id, shown in responses")
    serve.add_argument(
        "--journal-ui",
        action="store_true",
        help="serve the journal page at /journal/ too, behind the server's bearer tokens (with "
        "the scope engine:journal); the server file must set auth",
    )
    serve.add_argument(
        "--store",
        help=f"store URL (or ENGINE_STORE; default {DEFAULT_STORE_SHOWN}; 'none' for no store)",
    )
    serve.add_argument(
        "--traceback",
        action="store_true",
        help=f"print the traceback when importing FILE.py fails (or {TRACEBACK_ENV}=1)",
    )
    serve.add_argument(
        "--log-format",
        choices=["text", "json"],
        help="log lines as text, or as one JSON object each (or ENGINE_LOG_FORMAT)",
    )
    serve.add_argument(
        "--reload",
        action="store_true",
        help="serve the file again each time it (or a module it imports) changes",
    )
    serve.add_argument(
        "--workers",
        metavar="N",
        help="serve in N processes on the port, sharing the store (auto: one per core); each "
        "worker is a replica of its own, restarted if it dies",
    )
    serve.set_defaults(func=_serve)
    dev.add_command(command, store_help=store_help)
    install.add_command(command)

    call = command(
        "call",
        "call a tool, get a prompt or read a resource from the terminal, answering the "
        "server's questions at prompts",
        "exit status: 0 result, 1 error result, 2 protocol error\n\nexamples:\n"
        "  python -m engine call http://127.0.0.1:8000/mcp order_book --arg title=Dune\n"
        "  python -m engine call server.py order_book --arg title=Dune\n"
        "  python -m engine call server.py --prompt recommend --arg genre=sf\n"
        "  python -m engine call server.py --resource books://catalog\n"
        "  python -m engine call --stdio 'python -m engine serve server.py --stdio' TOOL\n"
        '  python -m engine call URL order_book --json \'{"title": "Neuromancer"}\' \\\n'
        '      --answer \'confirm_backorder={"action": "accept", "content": '
        '{"confirm": true}}\'',
    )
    call.add_argument("target", metavar="TARGET", nargs="?", help=TARGET_HELP)
    call.add_argument("tool", metavar="TOOL", nargs="?", help="the tool's name")
    call.add_argument(
        "--prompt", metavar="NAME", help="get this prompt (prompts/get) instead of a tool"
    )
    call.add_argument(
        "--resource", metavar="URI", help="read this resource (resources/read) instead of a tool"
    )
    call.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an argument; VALUE is text for string parameters (and every prompt argument), "
        "JSON otherwise (repeatable)",
    )
    call.add_argument("--json", metavar="ARGS", help="all arguments as one JSON object")
    call.add_argument(
        "--answer",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="answer the question with this key without prompting (repeatable)",
    )
    call.add_argument(
        "--max-rounds", type=int, default=20, metavar="N", help="give up after N rounds (20)"
    )
    call.add_argument(
        "--timeout", type=float, default=60.0, metavar="SECONDS", help="per request (60)"
    )
    call.add_argument("--stdio", metavar="CMD", help=STDIO_HELP)
    call.add_argument("--token", metavar="TOKEN", help=TOKEN_HELP)
    call.add_argument(
        "--log-level",
        default="info",
        choices=LOG_LEVELS,
        help="show the server's log messages at this level and above (info)",
    )
    call.add_argument(
        "--traceback",
        action="store_true",
        help=f"print the traceback when importing FILE.py fails (or {TRACEBACK_ENV}=1)",
    )
    call.set_defaults(func=_call)

    listing = command(
        "list",
        "list a server's tools, prompts, resources and resource templates, with their schemas",
        "exit status: 0 listed, 2 protocol or usage error\n\nexamples:\n"
        "  python -m engine list http://127.0.0.1:8000/mcp\n"
        "  python -m engine list server.py --json\n"
        "  python -m engine list --stdio 'python -m engine serve server.py --stdio'",
    )
    listing.add_argument("target", metavar="TARGET", nargs="?", help=TARGET_HELP)
    listing.add_argument("--stdio", metavar="CMD", help=STDIO_HELP)
    listing.add_argument("--token", metavar="TOKEN", help=TOKEN_HELP)
    listing.add_argument("--json", action="store_true", help="print JSON instead of text")
    listing.add_argument(
        "--timeout", type=float, default=60.0, metavar="SECONDS", help="per request (60)"
    )
    listing.add_argument(
        "--traceback",
        action="store_true",
        help=f"print the traceback when importing FILE.py fails (or {TRACEBACK_ENV}=1)",
    )
    listing.set_defaults(func=_list)

    calls = command("calls", "list recorded calls, most recently active first")
    calls.add_argument("--store", help=store_help)
    calls.add_argument("--tool", help="only calls of this tool (or prompt, or resource)")
    calls.add_argument(
        "--server",
        metavar="NAME",
        help="only calls served by the server of this name (MCPServer(NAME)), among the "
        f"{cli_journal.MATCHED_AMONG} most recently active",
    )
    calls.add_argument(
        "--since",
        metavar="WHEN",
        help="only calls active since WHEN: an ISO time (UTC unless it has an offset) or an age "
        "like 90 (seconds), 15m, 2h, 1d",
    )
    calls.add_argument("--limit", type=int, default=20, help="at most N calls (default 20)")
    calls.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _key_options(calls)
    calls.set_defaults(func=cli_journal.calls)

    listed_tasks = command(
        "tasks",
        "list the tasks in a store, the most recently created first",
        "a task's id is its call's: `show TASK_ID` tells its rounds\n\nexamples:\n"
        "  python -m engine tasks\n"
        "  python -m engine tasks --status working --store redis://127.0.0.1:6379/0",
    )
    listed_tasks.add_argument("--store", help=store_help)
    listed_tasks.add_argument(
        "--status", choices=cli_journal.TASK_STATUSES, help="only tasks in this status"
    )
    listed_tasks.add_argument("--limit", type=int, default=20, help="at most N tasks (default 20)")
    listed_tasks.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listed_tasks.set_defaults(func=cli_journal.tasks)

    show = command("show", "show a recorded call as a timeline of its rounds")
    show.add_argument("call_id", metavar="CALL_ID", help="the call id, or a unique part of it")
    show.add_argument("--store", help=store_help)
    show.add_argument("--json", action="store_true", help="print the recorded events as JSON")
    _key_options(show)
    show.set_defaults(func=cli_journal.show)

    replay = command(
        "replay",
        "re-run a recorded call against the current code; report the first divergence",
        "Nothing is written to any store, and once-steps are served from the record, so no\n"
        "side effect runs again.\n\n"
        "exit status: 0 every round matches, 1 divergence, 2 cannot replay\n\n"
        "examples:\n"
        "  python -m engine replay 6f0c2a... --app server.py\n"
        "  python -m engine replay --file tests/fixtures/order.json --app server.py:mcp",
    )
    replay.add_argument("call_id", metavar="CALL_ID", nargs="?", help="a call id from the store")
    replay.add_argument("--file", help="replay an exported call (fixture JSON) instead")
    replay.add_argument("--app", help="FILE.py[:ATTR]: the server code to run (required)")
    replay.add_argument("--store", help=store_help)
    replay.add_argument(
        "--args",
        metavar="JSON",
        help="the call's arguments the server did not record (all, or the Redacted() ones); "
        "they override recorded ones",
    )
    replay.add_argument(
        "--json",
        action="store_true",
        help="print the report as JSON (the divergence's recorded and live values whole)",
    )
    _key_options(replay)
    replay.add_argument(
        "--traceback",
        action="store_true",
        help=f"print the traceback when importing the app fails (or {TRACEBACK_ENV}=1)",
    )
    replay.set_defaults(func=cli_journal.replay)

    export = command(
        "export",
        "print a recorded call as JSON, to keep as a test fixture",
        "example:\n  python -m engine export 6f0c2a... > tests/fixtures/order.json",
    )
    export.add_argument("call_id", metavar="CALL_ID", help="the call id, or a unique part of it")
    export.add_argument("--store", help=store_help)
    _key_options(export)
    export.set_defaults(func=cli_journal.export)

    ui = command(
        "journal-ui",
        "see the journal in a browser: the calls, each call's rounds on a timeline, replay",
        "It reads the store and keys the other journal commands read, and serves a loopback\n"
        "address only. Replay from the page runs --app (or the server file named there) as\n"
        "`replay` does; nothing is written to the store.\n\n"
        "example:\n  python -m engine journal-ui --app server.py",
    )
    ui.add_argument("--store", help=store_help)
    ui.add_argument("--host", default="127.0.0.1", help="a loopback address (default 127.0.0.1)")
    ui.add_argument("--port", type=int, default=8765, help="default 8765")
    ui.add_argument("--app", help="FILE.py[:ATTR]: the server code replay runs by default")
    ui.add_argument(
        "--trace-url",
        metavar="TEMPLATE",
        help="link each round's trace: a URL with {trace_id} (or ENGINE_TRACE_URL), e.g. "
        "https://grafana.example/explore?traceId={trace_id}",
    )
    _key_options(ui)
    ui.set_defaults(func=_journal_ui)

    inspect = command(
        "inspect",
        "decode a requestState: its claims and the call's state, as JSON",
        "exit status: 0 decoded, 1 the keys do not open it, 2 usage error",
    )
    inspect.add_argument("token", metavar="TOKEN", help="the requestState ('-' reads stdin)")
    inspect.add_argument(
        "--keys", help="the server's secrets, comma-separated (or --keys-file, ENGINE_KEYS)"
    )
    inspect.add_argument(
        "--keys-file", metavar="PATH", help="a file of the server's secrets, as serve takes"
    )
    inspect.add_argument("--store", help="read state kept by reference from this store")
    inspect.set_defaults(func=cli_journal.inspect)

    keygen = command("keygen", "print a new requestState secret")
    keygen.set_defaults(func=_keygen)
    return parser


def _journal_mount(server: Any, args: argparse.Namespace) -> dict[str, Any]:
    """``serve --journal-ui``: the journal page at /journal/, behind the server's tokens."""
    from engine.debug.web.mounted import journal_ui_app

    try:
        page = journal_ui_app(
            server, replay_app=args.target, trace_url=os.environ.get("ENGINE_TRACE_URL") or None
        )
    except ValueError as exc:
        raise CLIError(f"--journal-ui: {exc}") from None
    return {"/journal": page}


def _journal_ui(args: argparse.Namespace) -> int:
    from engine.cli.journal_ui import journal_ui

    return journal_ui(args)


def _key_options(command: argparse.ArgumentParser) -> None:
    """``--keys`` and ``--keys-file``: what opens the sealed journal (else ``ENGINE_KEYS``)."""
    command.add_argument(
        "--keys",
        help="the server's secrets, comma-separated, to open the sealed journal (shown by ps: "
        "prefer --keys-file or ENGINE_KEYS)",
    )
    command.add_argument(
        "--keys-file", metavar="PATH", help="a file of the server's secrets, as serve takes"
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "log_format", None):
        os.environ[logs.LOG_FORMAT_ENV] = args.log_format
    try:
        log_format = logs.log_format()
    except ValueError as exc:
        print(inert(f"error: {exc}"), file=sys.stderr)
        return 2
    logs.configure(log_format, "INFO" if args.command in ("serve", "dev") else "WARNING")
    from engine.debug.journal import ReplayError

    try:
        result: int = args.func(args)
    except (CLIError, ReplayError) as exc:
        print(inert(f"error: {exc}"), file=sys.stderr)
        return exc.code if isinstance(exc, CLIError) else 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `... | head` stopped reading: not an error worth a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return result
