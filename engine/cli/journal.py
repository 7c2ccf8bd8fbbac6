"""The journal commands of ``python -m engine``: calls, tasks, show, export, replay and inspect.

They read what a server left behind, from another process: the journal in the store ``serve``
writes (the same URL by default; a store that lives inside the server process is refused with
what to pass instead), and the requestState tokens it sealed. :mod:`engine.cli.main` builds the
parser and dispatches to the functions here. Like the rest of the command line, they import
the engine modules they need when they run, not when the parser is built.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import secrets
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio

from engine._internal.inert import inert, inert_json
from engine.cli.shared import (
    CLIError,
    default_store,
    given_keys,
    json_object,
    load_server,
    local_keys,
)

T = TypeVar("T")


# --- reading the journal ---------------------------------------------------------------------


def reading_url(given: str | None) -> str:
    """The store the journal commands read; refuses what cannot hold another process's journal."""
    url = (given or os.environ.get("ENGINE_STORE") or default_store()).strip()
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


def given_or_kept_keys(args: argparse.Namespace) -> str | None:
    """The keys given on the command line or in ``ENGINE_KEYS``, else those ``serve`` keeps."""
    given = given_keys(args.keys, args.keys_file)
    if given is not None:
        return given
    kept = local_keys(create=False)
    return kept.secret if kept is not None else None


def journal_keys(args: argparse.Namespace) -> Any:
    """The key ring that opens the sealed journal: ``--keys``, ``--keys-file``, ``ENGINE_KEYS``
    or the keys ``serve`` keeps for this user; ``None`` when there are none (a sealed event
    then says what to pass)."""
    from engine.state.seal import KeyRing

    keys = given_or_kept_keys(args)
    if not keys:
        return None
    try:
        return KeyRing.from_env(keys)
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def _recorded_call(args: argparse.Namespace) -> Any:
    """The call ``args`` names, read from the store and opened with the given keys."""
    keys = journal_keys(args)
    return _with_store(args.store, lambda store: _recorded(store, args.call_id, keys))


MATCHED_AMONG = 1000
"""A part of an id is looked for among this many of the most recently active calls."""


async def _recorded(store: Any, call_id: str, keys: Any) -> Any:
    """The call with this id, or the one call whose id contains it: its start, its end (an id
    starts with its call's time, so calls begun together share their first characters: the end
    tells them apart), or any run of characters copied from the middle of one."""
    from engine.debug.journal import RecordedCall, ReplayError

    events = await store.events(call_id)
    if events:
        return RecordedCall.from_events(call_id, events, keys=keys)
    matches = [c.call_id for c in await store.calls(limit=MATCHED_AMONG) if call_id in c.call_id]
    if len(matches) == 1:
        return RecordedCall.from_events(matches[0], await store.events(matches[0]), keys=keys)
    if len(matches) > 1:
        raise ReplayError(f"{call_id!r} is part of {len(matches)} call ids; give more of it")
    raise ReplayError(
        f"no call {call_id!r} in the store (journals expire after journal_ttl, 24 h by "
        "default, and a server with journal_sample below 1 journals only some calls); list "
        "recorded calls with `python -m engine calls`"
    )


def parse_since(text: str, now: float | None = None) -> float:
    """``--since``: an ISO time (UTC unless it has an offset), or an age: 90, 15m, 2h, 1d."""
    from engine.debug.listing import moment

    try:
        return moment(text, now)
    except ValueError as exc:
        raise CLIError(f"--since {text!r}: {exc}") from None


def calls(args: argparse.Namespace) -> int:
    from engine.debug.listing import SEALED, CallFilter, list_calls

    since = parse_since(args.since) if args.since else None
    if args.limit < 1:
        raise CLIError("--limit must be at least 1")

    keys = journal_keys(args)
    wanted = CallFilter(tool=args.tool, server=args.server, since=since)
    page = _with_store(args.store, lambda store: list_calls(store, keys, wanted, limit=args.limit))
    found = [listed.summary for listed in page.calls]
    sources = {listed.summary.call_id: listed.source for listed in page.calls}
    if args.json:
        rows = [
            {
                "call_id": c.call_id,
                "server": sources[c.call_id].server,
                "target": c.target,
                "rounds": sources[c.call_id].rounds,
                "last_kind": c.last_kind,
                "first_ts": c.first_ts,
                "last_ts": c.last_ts,
                "principal": sources[c.call_id].principal,
            }
            for c in found
        ]
        print(inert_json(rows, indent=2))
        return 0
    if not found:
        filtered = args.tool or since or args.server is not None
        print("No recorded calls" + (" matching the filters." if filtered else "."))
        return 0
    now = time.time()
    id_width = max(len("CALL ID"), *(len(inert(c.call_id)) for c in found)) + 2
    servers = [sources[c.call_id].server or "?" for c in found]
    server_width = max(len("SERVER"), *(len(inert(server)) for server in servers)) + 2
    tool_width = max(len("TOOL"), *(len(inert(c.target or "?")) for c in found)) + 2
    header = (
        f"{'CALL ID':<{id_width}}{'SERVER':<{server_width}}{'TOOL':<{tool_width}}{'ROUNDS':>6}  "
        f"{'LAST':<16}{'STARTED (UTC)':<21}{'ACTIVE':<12}PRINCIPAL"
    )
    print(header)
    for c, server in zip(found, servers, strict=True):
        started = datetime.fromtimestamp(c.first_ts, UTC).strftime("%Y-%m-%d %H:%M:%S")
        principal = sources[c.call_id].principal
        print(
            f"{inert(c.call_id):<{id_width}}{inert(server):<{server_width}}"
            f"{inert(c.target or '?'):<{tool_width}}{sources[c.call_id].rounds:>6}  "
            f"{inert(c.last_kind or '?'):<16}"
            f"{started:<21}{_ago(now - c.last_ts):<12}"
            f"{inert(principal) if principal is not None else '-'}".rstrip()
        )
    if keys is None and any(source.principal == SEALED for source in sources.values()):
        print(f"(principals are sealed: {HOW_TO_OPEN})")
    return 0


HOW_TO_OPEN = "pass the server's keys with --keys-file PATH or ENGINE_KEYS to show them"


TASK_STATUSES = ("working", "input_required", "completed", "failed", "cancelled")


def tasks(args: argparse.Namespace) -> int:
    """The tasks in the store, the most recently created first: what the store keeps of them
    in the clear (``show TASK_ID`` tells the rounds of one, with the keys)."""
    if args.limit < 1:
        raise CLIError("--limit must be at least 1")

    async def work(store: Any) -> list[Any]:
        found: list[Any] = await store.tasks(limit=args.limit, status=args.status)
        return found

    found = _with_store(args.store, work)
    if args.json:
        rows = [
            {
                "task_id": t.task_id,
                "tool": t.target,
                "status": t.status,
                "created": t.created,
                "updated": t.updated,
                "writes": t.version,
            }
            for t in found
        ]
        print(inert_json(rows, indent=2))
        return 0
    if not found:
        print("No tasks" + (f" {args.status}." if args.status else "."))
        return 0
    now = time.time()
    id_width = max(len("TASK ID"), *(len(inert(t.task_id)) for t in found)) + 2
    tool_width = max(len("TOOL"), *(len(inert(t.target)) for t in found)) + 2
    print(
        f"{'TASK ID':<{id_width}}{'TOOL':<{tool_width}}{'STATUS':<16}{'CREATED (UTC)':<21}UPDATED"
    )
    for t in found:
        created = datetime.fromtimestamp(t.created, UTC).strftime("%Y-%m-%d %H:%M:%S")
        print(
            f"{inert(t.task_id):<{id_width}}{inert(t.target):<{tool_width}}{inert(t.status):<16}"
            f"{created:<21}"
            f"{_ago(now - t.updated)}"
        )
    return 0


def _ago(seconds: float) -> str:
    seconds = max(seconds, 0)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"


def show(args: argparse.Namespace) -> int:
    from engine.debug.render import timeline

    call = _recorded_call(args)
    print(call.dumps() if args.json else timeline(call), end="" if args.json else "\n")
    return 0


def export(args: argparse.Namespace) -> int:
    call = _recorded_call(args)
    sys.stdout.write(call.dumps())
    return 0


# --- replay ------------------------------------------------------------------------------------


def replay(args: argparse.Namespace) -> int:
    from engine.debug.journal import RecordedCall
    from engine.debug.replay import replay_call

    if args.call_id is not None and args.file is not None:
        raise CLIError("give a CALL_ID or --file fixture.json, not both: replay one call")
    if args.call_id is None and args.file is None:
        raise CLIError("give the call to replay: a CALL_ID from the store, or --file fixture.json")
    arguments = None
    if args.args is not None:
        arguments = json_object(args.args, "--args")
    call = RecordedCall.load(args.file) if args.file is not None else _recorded_call(args)
    if args.app is None:
        server = next((e["server"] for e in call.events if isinstance(e.get("server"), str)), None)
        served = f"; the call was served by the server named {server!r}" if server else ""
        raise CLIError(
            f"give the server code to replay call {call.call_id} against: --app FILE.py[:ATTR], "
            f"the file you serve (as `serve` takes it){served}; the journal keeps what the "
            "call did, not where its code lives"
        )
    # The app must not open the store the journal came from, and never seals a token here.
    os.environ.pop("ENGINE_STORE", None)
    os.environ.setdefault("ENGINE_KEYS", secrets.token_hex(32))
    app = load_server(args.app, traceback=args.traceback)
    report = anyio.run(lambda: replay_call(app, call, arguments=arguments))
    if args.json:
        print(inert_json(report.to_document(), indent=2))
    else:
        print(report.render())
    return 0 if report.ok else 1


# --- inspect -----------------------------------------------------------------------------------


def inspect(args: argparse.Namespace) -> int:
    from engine.debug.tokens import describe_request_state, describe_state
    from engine.errors import InvalidRequestState
    from engine.state.seal import PREFIX, KeyRing

    token = (sys.stdin.read() if args.token == "-" else args.token).strip()
    keys = given_or_kept_keys(args)
    if not keys:
        raise CLIError(
            "give the server's keys: --keys-file PATH, ENGINE_KEYS or --keys SECRET[,SECRET2]"
        )
    try:
        ring = KeyRing.from_env(keys)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    try:
        shown = describe_request_state(ring, token)
    except InvalidRequestState as exc:
        raise CLIError(_refusal(exc.reason, token, ring.labels, PREFIX), code=1) from None
    ref = shown.get("state_ref")
    if ref is not None:
        call_id = shown["claims"]["call_id"]
        if args.store is None:
            shown["state"] = "kept in the store by reference: pass --store URL to read it"
        else:
            blob = _with_store(args.store, lambda store: store.get_blob(call_id, ref["blob_id"]))
            if blob is not None:
                from engine.store_services.spill import SPILLED_STATE

                try:
                    blob = ring.open_record(blob, SPILLED_STATE)
                except InvalidRequestState:
                    raise CLIError(
                        "the state blob in the store does not open with the given keys: pass "
                        "the keys of the server that sealed it",
                        code=1,
                    ) from None
            if blob is None:
                shown["state"] = "the blob is gone from the store (expired or never written)"
            elif hashlib.sha256(blob).hexdigest() != ref["sha256"]:
                shown["state"] = "the blob in the store does not match the token's digest"
            else:
                shown["state"] = describe_state(blob)
    print(inert_json(shown, indent=2))
    return 0


def _refusal(reason: str, token: str, labels: list[str], prefix: str) -> str:
    from engine.debug.tokens import key_id

    if reason == "unknown key":
        return (
            f"this requestState was sealed with key id {key_id(token)}, which is not among the "
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


__all__ = [
    "calls",
    "export",
    "inspect",
    "journal_keys",
    "parse_since",
    "reading_url",
    "replay",
    "show",
]
