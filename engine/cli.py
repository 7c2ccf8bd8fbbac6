"""``python -m engine``: serve a server file, try its tools, and debug its calls from the journal.

What an operator does around a server should be one command away, with no MCP host, notebook or
database client to set up: ``serve`` it, ``call`` a tool and answer its questions at prompts,
list the recorded ``calls``, ``show`` one as a timeline, ``replay`` it against the current code,
``export`` it as a test fixture, ``inspect`` a requestState, ``keygen`` a secret. One entry point
(also the ``engine`` console script); the journal commands read the store ``serve`` writes, so
they default to the same URL.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.util
import json
import logging
import os
import secrets
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio

from engine.server import MCPServer

T = TypeVar("T")


class CLIError(Exception):
    """A problem the user can fix; printed as ``error: ...`` with exit status ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def load_server(target: str) -> MCPServer:
    """``FILE.py[:ATTR]`` → the MCPServer it defines (``mcp`` or the only one)."""
    path_text, _, attr = target.partition(":")
    if len(path_text) == 1 and attr and "\\" in attr:  # a Windows drive letter
        path_text, _, attr = target.rpartition(":")
    path = Path(path_text).resolve()
    if not path.is_file():
        raise SystemExit(f"error: {path_text} is not a file; give FILE.py or FILE.py:ATTR")
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"error: cannot import {path_text}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    if attr:
        found: Any = module
        for part in attr.split("."):
            found = getattr(found, part, None)
        if callable(found) and not isinstance(found, MCPServer):
            found = found()
        if not isinstance(found, MCPServer):
            raise SystemExit(f"error: {path_text}:{attr} is not an MCPServer")
        return found
    servers = [v for v in vars(module).values() if isinstance(v, MCPServer)]
    if "mcp" in vars(module) and isinstance(module.mcp, MCPServer):
        return module.mcp
    if len(servers) == 1:
        return servers[0]
    raise SystemExit(
        f"error: {path_text} defines {len(servers)} MCPServer objects; name one as FILE.py:ATTR"
    )


DEFAULT_STORE = "sqlite:///.engine/calls.sqlite3"


def store_url(given: str | None) -> str | None:
    """``--store``, else ``ENGINE_STORE``, else the embedded default; ``none`` disables."""
    url = given or os.environ.get("ENGINE_STORE") or DEFAULT_STORE
    if url.lower() == "none":
        return None
    if url.startswith("sqlite:///"):
        Path(url[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
    return url


def _serve(args: argparse.Namespace) -> int:
    if args.keys:
        os.environ["ENGINE_KEYS"] = args.keys
    if args.replica:
        os.environ["ENGINE_REPLICA_ID"] = args.replica
    store = store_url(args.store)
    if store is None:
        os.environ.pop("ENGINE_STORE", None)
    else:
        os.environ["ENGINE_STORE"] = store
    server = load_server(args.target)
    if args.stdio:
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port)
    return 0


def _keygen(args: argparse.Namespace) -> int:
    print(secrets.token_hex(32))
    return 0


# --- reading the journal ---------------------------------------------------------------------


def reading_url(given: str | None) -> str:
    """The store the journal commands read; refuses what cannot hold another process's journal."""
    url = (given or os.environ.get("ENGINE_STORE") or DEFAULT_STORE).strip()
    source = "--store" if given else "ENGINE_STORE" if os.environ.get("ENGINE_STORE") else None
    if url.lower() == "none":
        raise CLIError(
            "there is no journal without a store: pass --store URL of the server's store"
        )
    if url.lower().startswith("memory://"):
        raise CLIError(
            "memory:// lives inside the server process, so no other process can read its "
            "journal; serve with a SQLite file or Redis and pass that URL as --store"
        )
    if url.startswith("sqlite:///"):
        path = Path(url[len("sqlite:///") :])
        if not path.is_file():
            where = f"{source} says {url}" if source else f"the default store is {url}"
            raise CLIError(
                f"no journal at {path} ({where}): run this where the server runs, or pass the "
                "server's store as --store URL (or ENGINE_STORE)"
            )
    return url


def _with_store(given: str | None, work: Callable[[Any], Awaitable[T]]) -> T:
    from stores import StoreUnavailable, open_store

    url = reading_url(given)

    async def run() -> T:
        try:
            store = open_store(url)
        except ValueError as exc:
            raise CLIError(str(exc)) from None
        try:
            return await work(store)
        finally:
            await store.aclose()

    try:
        return anyio.run(run)
    except StoreUnavailable as exc:
        raise CLIError(str(exc)) from None


async def _recorded(store: Any, call_id: str) -> Any:
    """The call with this id, or with this unique id prefix."""
    from engine.replay import RecordedCall, ReplayError

    events = await store.events(call_id)
    if events:
        return RecordedCall.from_events(call_id, events)
    matches = [c.call_id for c in await store.calls(limit=1000) if c.call_id.startswith(call_id)]
    if len(matches) == 1:
        return RecordedCall.from_events(matches[0], await store.events(matches[0]))
    if len(matches) > 1:
        raise ReplayError(f"{call_id!r} starts {len(matches)} call ids; give more of it")
    raise ReplayError(
        f"no call {call_id!r} in the store (journals expire after journal_ttl, 24 h by "
        "default); list recorded calls with `python -m engine calls`"
    )


def parse_since(text: str, now: float | None = None) -> float:
    """``--since``: an ISO time (UTC unless it has an offset), or an age: 90, 15m, 2h, 1d."""
    now = time.time() if now is None else now
    value = text.strip()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    number, unit = (value[:-1], units[value[-1]]) if value[-1:] in units else (value, 1)
    try:
        return now - float(number) * unit
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise CLIError(
            f"--since {text!r}: give a time like 2026-05-01T10:00 (UTC unless it has an offset) "
            "or an age like 90 (seconds), 15m, 2h or 1d"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _calls(args: argparse.Namespace) -> int:
    since = parse_since(args.since) if args.since else None
    if args.limit < 1:
        raise CLIError("--limit must be at least 1")

    async def work(store: Any) -> list[Any]:
        found: list[Any] = await store.calls(limit=args.limit, since=since, target=args.tool)
        return found

    found = _with_store(args.store, work)
    if args.json:
        rows = [
            {
                "call_id": c.call_id,
                "target": c.target,
                "rounds": c.events,
                "last_kind": c.last_kind,
                "first_ts": c.first_ts,
                "last_ts": c.last_ts,
            }
            for c in found
        ]
        print(json.dumps(rows, indent=2))
        return 0
    if not found:
        print("No recorded calls" + (" matching the filters." if args.tool or since else "."))
        return 0
    now = time.time()
    header = f"{'CALL ID':<26}{'TOOL':<22}{'ROUNDS':>6}  {'LAST':<16}{'STARTED (UTC)':<21}ACTIVE"
    print(header)
    for c in found:
        started = datetime.fromtimestamp(c.first_ts, UTC).strftime("%Y-%m-%d %H:%M:%S")
        print(
            f"{c.call_id:<26}{(c.target or '?'):<22}{c.events:>6}  {(c.last_kind or '?'):<16}"
            f"{started:<21}{_ago(now - c.last_ts)}"
        )
    return 0


def _ago(seconds: float) -> str:
    seconds = max(seconds, 0)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"


def _show(args: argparse.Namespace) -> int:
    from engine.replay import timeline

    call = _with_store(args.store, lambda store: _recorded(store, args.call_id))
    print(call.dumps() if args.json else timeline(call), end="" if args.json else "\n")
    return 0


def _export(args: argparse.Namespace) -> int:
    call = _with_store(args.store, lambda store: _recorded(store, args.call_id))
    sys.stdout.write(call.dumps())
    return 0


# --- replay ------------------------------------------------------------------------------------


def _replay(args: argparse.Namespace) -> int:
    from engine.replay import RecordedCall, replay_call

    if (args.call_id is None) == (args.file is None):
        raise CLIError("give the call to replay: a CALL_ID from the store, or --file fixture.json")
    arguments = None
    if args.args is not None:
        arguments = _json_object(args.args, "--args")
    if args.file is not None:
        call = RecordedCall.load(args.file)
    else:
        call = _with_store(args.store, lambda store: _recorded(store, args.call_id))
    # The app must not open the store the journal came from, and never seals a token here.
    os.environ.pop("ENGINE_STORE", None)
    os.environ.setdefault("ENGINE_KEYS", secrets.token_hex(32))
    try:
        app = load_server(args.app)
    except SystemExit as exc:
        raise CLIError(str(exc.code).removeprefix("error: ")) from None
    except Exception:
        traceback.print_exc()
        raise CLIError(f"importing {args.app} failed (traceback above)") from None
    report = anyio.run(lambda: replay_call(app, call, arguments=arguments))
    print(report.render())
    return 0 if report.ok else 1


EXAMPLE_OBJECT = '{"title": "Dune"}'


def _json_object(text: str, option: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise CLIError(
            f"{option}: not JSON ({exc}); give an object like '{EXAMPLE_OBJECT}'"
        ) from None
    if not isinstance(value, dict):
        raise CLIError(f"{option}: give a JSON object, like '{EXAMPLE_OBJECT}'")
    return value


# --- inspect -----------------------------------------------------------------------------------


def _inspect(args: argparse.Namespace) -> int:
    from engine.claims import Claims, StateRef
    from engine.errors import InvalidRequestState
    from engine.seal import PREFIX, KeyRing

    token = (sys.stdin.read() if args.token == "-" else args.token).strip()
    keys = args.keys or os.environ.get("ENGINE_KEYS")
    if not keys:
        raise CLIError("give the server's keys: --keys SECRET[,SECRET2] (or ENGINE_KEYS)")
    try:
        ring = KeyRing.from_env(keys)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    try:
        claims = Claims.decode(ring.open(token, max_chars=len(token) + 1))
    except InvalidRequestState as exc:
        raise CLIError(_refusal(exc.reason, token, ring.labels, PREFIX), code=1) from None
    now = time.time()
    shown: dict[str, Any] = {
        "claims": {
            "call_id": claims.call_id.hex(),
            "round": claims.round_no,
            "issued_at": _iso(claims.issued_at),
            "expires_at": _iso(claims.issued_at + claims.ttl),
            "ttl": claims.ttl,
            "expired": now >= claims.issued_at + claims.ttl,
            "binding": claims.binding.hex(),
            "binding_tags": claims.tags.hex(),
            "principal": claims.principal.hex() if claims.principal is not None else None,
        }
    }
    if isinstance(claims.state, StateRef):
        ref = {"blob_id": claims.state.blob_id, "sha256": claims.state.sha256.hex()}
        shown["state_ref"] = ref
        if args.store is None:
            shown["state"] = "kept in the store by reference: pass --store URL to read it"
            state_bytes = None
        else:
            state_bytes = _with_store(
                args.store, lambda store: store.get_blob(claims.call_id.hex(), ref["blob_id"])
            )
            if state_bytes is None:
                shown["state"] = "the blob is gone from the store (expired or never written)"
            elif hashlib.sha256(state_bytes).digest() != claims.state.sha256:
                shown["state"] = "the blob in the store does not match the token's digest"
                state_bytes = None
    else:
        state_bytes = claims.state
    if state_bytes is not None:
        shown["state"] = _state(state_bytes)
    print(json.dumps(shown, indent=2, ensure_ascii=False))
    return 0


def _refusal(reason: str, token: str, labels: list[str], prefix: str) -> str:
    if reason == "unknown key":
        raw = base64.urlsafe_b64decode(token[len(prefix) :] + "=" * (-len(token) % 4))
        return (
            f"this requestState was sealed with key id {raw[:4].hex()}, which is not among the "
            f"keys given (ids {', '.join(labels)}); pass the server's keys with --keys or "
            "ENGINE_KEYS"
        )
    if reason == "seal":
        return (
            "this requestState does not open with the given key: it was altered, or sealed with "
            "another secret; pass the server's exact keys with --keys or ENGINE_KEYS"
        )
    return (
        f"this is not a requestState ({reason}); tokens start with {prefix} followed by base64url"
    )


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def _state(data: bytes) -> dict[str, Any]:
    from engine.errors import InvalidRequestState
    from engine.replay import jsonable
    from engine.state import CallState

    try:
        state = CallState.decode(data)
    except InvalidRequestState as exc:
        return {"undecodable": exc.reason}
    return {
        "answers": {
            key: {"question_fingerprint": fp.hex(), "answer": jsonable(answer)}
            for key, (fp, answer) in state.answers.items()
        },
        "asked": {key: fp.hex() for key, fp in state.asked.items()},
        "checkpoints": jsonable(state.checkpoints),
    }


# --- call --------------------------------------------------------------------------------------


def _call(args: argparse.Namespace) -> int:
    from engine.terminal import CallOptions, parse_answer, run_call

    arguments = _json_object(args.json, "--json") if args.json is not None else {}
    answers: dict[str, Any] = {}
    for pair in args.answer:
        try:
            key, value = parse_answer(pair)
        except ValueError as exc:
            raise CLIError(str(exc)) from None
        answers[key] = value
    options = CallOptions(
        url=args.url,
        tool=args.tool,
        arguments=arguments,
        raw_arguments=list(args.arg),
        answers=answers,
        max_rounds=args.max_rounds,
        timeout=args.timeout,
    )
    return run_call(options)


# --- the parser ----------------------------------------------------------------------------------


DESCRIPTION = """\
Serve an MCP server file, try its tools from the terminal, and debug its calls from the journal.

The journal commands (calls, show, replay, export) read the store that serve writes: --store,
else ENGINE_STORE, else sqlite:///.engine/calls.sqlite3. Every command takes --help; see
docs/replay.md for a walk-through."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m engine",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    store_help = (
        f"the server's store URL (default: ENGINE_STORE, else {DEFAULT_STORE}); SQLite or Redis"
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
    serve.add_argument("--keys", help="comma-separated requestState secrets (or ENGINE_KEYS)")
    serve.add_argument("--replica", help="this replica's id, shown in responses")
    serve.add_argument(
        "--store",
        help=f"store URL (or ENGINE_STORE; default {DEFAULT_STORE}; 'none' for no store)",
    )
    serve.set_defaults(func=_serve)

    call = command(
        "call",
        "call a tool from the terminal, answering its questions at prompts",
        "exit status: 0 result, 1 error result, 2 protocol error\n\nexamples:\n"
        "  python -m engine call http://127.0.0.1:8000/mcp order_book --arg title=Dune\n"
        '  python -m engine call URL order_book --json \'{"title": "Neuromancer"}\' \\\n'
        '      --answer \'confirm_backorder={"action": "accept", "content": '
        '{"confirm": true}}\'',
    )
    call.add_argument(
        "url", metavar="URL", help="the server's MCP endpoint, e.g. http://127.0.0.1:8000/mcp"
    )
    call.add_argument("tool", metavar="TOOL", help="the tool's name")
    call.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an argument; VALUE is text for string parameters, JSON otherwise (repeatable)",
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
    call.set_defaults(func=_call)

    calls = command("calls", "list recorded calls, most recently active first")
    calls.add_argument("--store", help=store_help)
    calls.add_argument("--tool", help="only calls of this tool (or prompt, or resource)")
    calls.add_argument(
        "--since",
        metavar="WHEN",
        help="only calls active since WHEN: an ISO time (UTC unless it has an offset) or an age "
        "like 90 (seconds), 15m, 2h, 1d",
    )
    calls.add_argument("--limit", type=int, default=20, help="at most N calls (default 20)")
    calls.add_argument("--json", action="store_true", help="print JSON instead of a table")
    calls.set_defaults(func=_calls)

    show = command("show", "show a recorded call as a timeline of its rounds")
    show.add_argument("call_id", metavar="CALL_ID", help="the call id (or a unique prefix)")
    show.add_argument("--store", help=store_help)
    show.add_argument("--json", action="store_true", help="print the recorded events as JSON")
    show.set_defaults(func=_show)

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
    replay.add_argument("--app", required=True, help="FILE.py[:ATTR]: the server code to run")
    replay.add_argument("--store", help=store_help)
    replay.add_argument(
        "--args",
        metavar="JSON",
        help="the call's arguments, when the server did not record them",
    )
    replay.set_defaults(func=_replay)

    export = command(
        "export",
        "print a recorded call as JSON, to keep as a test fixture",
        "example:\n  python -m engine export 6f0c2a... > tests/fixtures/order.json",
    )
    export.add_argument("call_id", metavar="CALL_ID", help="the call id (or a unique prefix)")
    export.add_argument("--store", help=store_help)
    export.set_defaults(func=_export)

    inspect = command(
        "inspect",
        "decode a requestState: its claims and the call's state, as JSON",
        "exit status: 0 decoded, 1 the keys do not open it, 2 usage error",
    )
    inspect.add_argument("token", metavar="TOKEN", help="the requestState ('-' reads stdin)")
    inspect.add_argument("--keys", help="the server's secrets, comma-separated (or ENGINE_KEYS)")
    inspect.add_argument("--store", help="read state kept by reference from this store")
    inspect.set_defaults(func=_inspect)

    keygen = command("keygen", "print a new requestState secret")
    keygen.set_defaults(func=_keygen)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.command == "serve" else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from engine.replay import ReplayError

    try:
        result: int = args.func(args)
    except (CLIError, ReplayError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code if isinstance(exc, CLIError) else 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `... | head` stopped reading: not an error worth a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return result
