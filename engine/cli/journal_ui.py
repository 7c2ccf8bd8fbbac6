"""``python -m engine journal-ui``: the journal's web page, on a loopback address.

It reads the store and opens the journal with the keys the other journal commands use (the
same defaults and options), and replays against the server file given with ``--app`` or named
on the page. It has no sign-in of its own, so it serves a loopback address only; to open the
journal of a fleet from elsewhere, mount it into the served app behind its bearer tokens
(:func:`engine.debug.web.mounted.journal_ui_app`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import AsyncIterator

from engine.cli.journal import journal_keys, reading_url
from engine.cli.shared import CLIError
from engine.cli.supervisor import endpoint, listen

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def journal_ui(args: argparse.Namespace) -> int:
    import uvicorn
    from starlette.applications import Starlette

    from engine.debug.web.app import (
        JournalSource,
        ReplaySettings,
        checked_trace_url,
        journal_ui,
    )
    from stores import Store, StoreUnavailable, open_store

    if args.host not in LOOPBACK:
        raise CLIError(
            f"--host {args.host}: the journal page has no sign-in of its own, so it serves a "
            "loopback address only (127.0.0.1, ::1 or localhost); to open it from elsewhere, "
            'mount it into the served app behind its tokens (docs/replay.md, "See a call in '
            'the browser")'
        )
    trace_url = args.trace_url or os.environ.get("ENGINE_TRACE_URL") or None
    if trace_url is not None:
        try:
            trace_url = checked_trace_url(trace_url)
        except ValueError as exc:
            raise CLIError(str(exc)) from None
    if not 0 <= args.port <= 65535:
        raise CLIError(
            f"--port {args.port}: a port is a number from 1 to 65535 (0 picks any free one)"
        )
    url = reading_url(args.store)
    keys = journal_keys(args)
    try:
        opened = open_store(url)
    except ValueError as exc:
        raise CLIError(str(exc)) from None

    def store() -> Store:
        return opened

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await opened.aclose()

    app = journal_ui(
        JournalSource(store, lambda: keys),
        ReplaySettings(args.app, anywhere=True),
        loopback_only=True,
        lifespan=lifespan,
        trace_url=trace_url,
    )
    with contextlib.closing(listen(args.host, args.port)) as sock:  # in use: one line
        page = endpoint(sock, args.host).removesuffix("mcp")
        print(f"The journal of {url}: {page} (Ctrl-C to stop)", flush=True)
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        try:
            uvicorn.Server(config).run(sockets=[sock])
        except StoreUnavailable as exc:
            raise CLIError(str(exc)) from None
    return 0


__all__ = ["journal_ui"]
