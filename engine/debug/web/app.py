"""The journal's web page as a Starlette application: the calls, a call, its export and replay.

It reads the journal the way the journal commands do (:mod:`engine.debug.listing`,
:class:`~engine.debug.journal.RecordedCall`), replays a call by running ``python -m engine
replay --json`` in a process of its own (the code under test runs there, fresh from its file,
and nothing of it stays in this process), and exports what ``export`` writes.

Two ways to run it: ``python -m engine journal-ui`` (:mod:`engine.cli.journal_ui`), on a
loopback address, where only requests naming a loopback host are answered (a page elsewhere
cannot reach it through DNS rebinding); and mounted into a served app
(:func:`engine.debug.web.mounted.journal_ui_app`), behind the server's bearer tokens. Either
way every POST carries the page's own token in a header (a form on another site cannot send
one), and every response forbids scripts and styles from anywhere but this app.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from engine.debug.journal import RecordedCall, ReplayError
from engine.debug.listing import OUTCOMES, SEALED, CallFilter, list_calls, moment
from engine.debug.web import pages
from engine.debug.web.replay_view import replay_result
from engine.state.seal import KeyRing
from stores import Store, StoreUnavailable

STATIC = Path(__file__).parent / "static"
STATIC_FILES = {"journal.css": "text/css", "journal.js": "text/javascript"}
PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
REPLAY_SECONDS = 120.0
"""A replay from the page that runs longer is stopped, and says so."""
TOKEN_HEADER = "x-journal-ui-token"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})

SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}

Authorizer = Callable[[Request], Awaitable[Response | None]]
"""Decides whether a request may read the journal: ``None`` if it may, else the response."""


@dataclass
class JournalSource:
    """Where the page reads: the store (open while the app runs) and the keys (``None``:
    sealed values are shown sealed)."""

    store: Callable[[], Store]
    keys: Callable[[], KeyRing | None]


@dataclass
class ReplaySettings:
    app: str | None
    """The server file replay runs by default (``FILE.py[:ATTR]``)."""
    anywhere: bool
    """Whether the page may name another server file (only where the page is local)."""


def journal_ui(
    source: JournalSource,
    replay: ReplaySettings,
    *,
    authorize: Authorizer | None = None,
    loopback_only: bool = False,
    lifespan: Callable[[Starlette], AbstractAsyncContextManager[None]] | None = None,
    routes: Sequence[Route] = (),
    trace_url: str | None = None,
) -> Starlette:
    """The application; ``authorize`` guards every page, ``loopback_only`` refuses requests
    that do not name a loopback host, ``trace_url`` (checked by :func:`checked_trace_url`)
    links each round's trace id."""
    page_token = secrets.token_urlsafe(24)

    def base(request: Request) -> str:
        return str(request.scope.get("root_path", "")).rstrip("/")

    def html_response(body: str, status: int = 200) -> HTMLResponse:
        return HTMLResponse(body, status, headers=SECURITY_HEADERS)

    def message(request: Request, title: str, text: str, status: int) -> HTMLResponse:
        return html_response(pages.message_page(base(request), page_token, title, text), status)

    async def guarded(request: Request) -> Response | None:
        if loopback_only:
            host = host_name(request.headers.get("host", ""))
            if host not in LOOPBACK_HOSTS:
                return Response(
                    "This page answers requests to a loopback address only "
                    "(http://127.0.0.1:PORT/).",
                    421,
                    headers=SECURITY_HEADERS,
                )
        if authorize is not None:
            return await authorize(request)
        return None

    def posted_by_page(request: Request) -> bool:
        given = request.headers.get(TOKEN_HEADER, "")
        return secrets.compare_digest(given.encode(), page_token.encode())

    async def calls(request: Request) -> Response:
        refused = await guarded(request)
        if refused is not None:
            return refused
        given = {k: v.strip() for k, v in request.query_params.items() if v.strip()}
        problem = None
        try:
            if given.get("outcome", "") not in ("", *OUTCOMES):
                raise ValueError(f"outcome: give one of {', '.join(OUTCOMES)}, or none")
            wanted = CallFilter(
                tool=given.get("tool"),
                server=given.get("server"),
                principal=given.get("principal"),
                outcome=given.get("outcome"),
                since=moment(given["since"]) if "since" in given else None,
                until=moment(given["until"]) if "until" in given else None,
            )
            before = float(given["before"]) if "before" in given else None
            limit = int(given.get("limit", PAGE_SIZE))
            if not 1 <= limit <= MAX_PAGE_SIZE:
                raise ValueError(f"limit: give 1 to {MAX_PAGE_SIZE} calls a page")
        except ValueError as exc:
            wanted, before, problem = CallFilter(), None, f"Filters not applied: {exc}"
            limit = PAGE_SIZE
        keys = source.keys()
        try:
            page = await list_calls(source.store(), keys, wanted, limit=limit, before=before)
        except StoreUnavailable as exc:
            return message(request, "The store does not answer", str(exc), 503)
        if "rows" in given:
            return html_response(pages.call_rows(base(request), page.calls))
        sealed = keys is None and any(c.source.principal == SEALED for c in page.calls)
        body = pages.calls_page(
            base(request), page_token, page, given, problem=problem, sealed_hint=sealed
        )
        return html_response(body)

    async def events(request: Request) -> list[dict[str, Any]] | Response:
        call_id = request.path_params["call_id"]
        try:
            found: list[dict[str, Any]] = await source.store().events(call_id)
        except StoreUnavailable as exc:
            return message(request, "The store does not answer", str(exc), 503)
        if not found:
            return message(
                request,
                "No such call",
                f"No call {call_id!r} in the store: its journal may have expired (journal_ttl) "
                "or the server journals only some calls (journal_sample).",
                404,
            )
        return found

    async def call(request: Request) -> Response:
        refused = await guarded(request)
        if refused is not None:
            return refused
        found = await events(request)
        if isinstance(found, Response):
            return found
        call_id = request.path_params["call_id"]
        try:
            recorded, problem = RecordedCall.readable(call_id, found, keys=source.keys())
        except ReplayError as exc:
            return message(request, "Unreadable journal", str(exc), 422)
        task = None
        if any("task" in event or event.get("kind") == "task" for event in found):
            try:
                task = await source.store().get_task(call_id)
            except (StoreUnavailable, ValueError):
                task = None
        body = pages.call_page(
            base(request),
            page_token,
            recorded,
            problem=problem,
            task=task,
            replay_app=replay.app,
            replay_anywhere=replay.anywhere,
            trace_url=trace_url,
        )
        return html_response(body)

    async def opened(request: Request) -> RecordedCall | Response:
        found = await events(request)
        if isinstance(found, Response):
            return found
        try:
            return RecordedCall.from_events(
                request.path_params["call_id"], found, keys=source.keys()
            )
        except ReplayError as exc:
            return message(request, "The call does not open", str(exc), 409)

    async def export(request: Request) -> Response:
        refused = await guarded(request)
        if refused is not None:
            return refused
        recorded = await opened(request)
        if isinstance(recorded, Response):
            return recorded
        name = "".join(c for c in recorded.call_id if c.isalnum() or c in "-_")[:80] or "call"
        return Response(
            recorded.dumps(),
            media_type="application/json",
            headers={
                **SECURITY_HEADERS,
                "content-disposition": f'attachment; filename="call-{name}.json"',
            },
        )

    async def replay_call(request: Request) -> Response:
        refused = await guarded(request)
        if refused is not None:
            return refused
        if not posted_by_page(request):
            return Response("Replay is started from the call's page.", 403)
        form = await request.form()
        named = str(form.get("app") or "").strip() if replay.anywhere else ""
        target = named or replay.app
        if not target:
            fragment = replay_result(None, "give the server file to replay against")
            return html_response(fragment, 400)
        recorded = await opened(request)
        if isinstance(recorded, Response):
            fragment = replay_result(None, "the call does not open with the page's keys")
            return html_response(fragment, 409)
        report, problem = await run_replay(recorded, target)
        return html_response(replay_result(report, problem))

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC_FILES:
            return Response("Not Found", 404)
        return Response(
            (STATIC / name).read_bytes(), media_type=STATIC_FILES[name], headers=SECURITY_HEADERS
        )

    listed = [
        *routes,
        Route("/", calls, methods=["GET"]),
        Route("/call/{call_id}", call, methods=["GET"]),
        Route("/call/{call_id}/export", export, methods=["GET"]),
        Route("/call/{call_id}/replay", replay_call, methods=["POST"]),
        Route("/static/{name}", static, methods=["GET"]),
    ]
    return Starlette(routes=listed, lifespan=lifespan)


async def run_replay(call: RecordedCall, target: str) -> tuple[dict[str, Any] | None, str | None]:
    """``python -m engine replay --file FIXTURE --app TARGET --json``, in a process of its own:
    its report, or the one line it ended with."""
    env = {k: v for k, v in os.environ.items() if k != "ENGINE_STORE"}
    with tempfile.TemporaryDirectory(prefix="engine-replay-") as scratch:
        fixture = Path(scratch) / "call.json"
        fixture.write_text(call.dumps(), encoding="utf-8")
        command = [sys.executable, "-m", "engine", "replay", "--file", str(fixture)]
        command += ["--app", target, "--json"]
        try:
            with anyio.fail_after(REPLAY_SECONDS):
                done = await anyio.run_process(command, check=False, env=env)
        except TimeoutError:
            return None, f"the replay ran longer than {REPLAY_SECONDS:.0f} s and was stopped"
    if done.returncode in (0, 1):
        try:
            report = json.loads(done.stdout)
        except ValueError:
            report = None
        if isinstance(report, dict):
            return report, None
    lines = [line for line in done.stderr.decode(errors="replace").splitlines() if line.strip()]
    return None, lines[-1] if lines else f"replay exited with status {done.returncode}"


def checked_trace_url(template: str) -> str:
    """A trace URL template: an http(s) URL with ``{trace_id}`` where the round's trace id
    goes; :class:`ValueError` saying what to give otherwise."""
    if not template.startswith(("https://", "http://")) or "{trace_id}" not in template:
        raise ValueError(
            f"trace URL {template!r}: give an http(s) URL with {{trace_id}} where the trace id "
            "goes, e.g. https://grafana.example/explore?traceId={trace_id}"
        )
    return template


def host_name(header: str) -> str:
    """The host a ``Host`` header names, without its port (``[::1]`` keeps its brackets)."""
    if header.startswith("["):
        return header.partition("]")[0] + "]"
    return header.rpartition(":")[0] if ":" in header else header


__all__ = [
    "JournalSource",
    "ReplaySettings",
    "checked_trace_url",
    "journal_ui",
    "run_replay",
]
