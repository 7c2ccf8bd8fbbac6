"""The journal's pages as HTML: the calls list, a call, a replay's report.

Plain functions returning strings: every value from a journal goes through
:mod:`engine.debug.web.markup`, every attribute value is quoted and escaped, and nothing else
is interpolated but numbers and this module's own text. The pages load one stylesheet and one
script of this package, and no other resource (the app sends a Content-Security-Policy that
forbids any other).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

from engine.debug.journal import SEALED_PAYLOAD, RecordedCall, RecordedRound
from engine.debug.listing import OUTCOMES, SCANNED_AT_MOST, SEALED, ListedCall, Page
from engine.debug.web.markup import attr, json_block, text
from engine.debug.web.replay_view import call_url, replay_form
from engine.debug.web.timeline import timeline_svg, took_over
from stores import TaskRow

STATES = {
    "input_required": "waiting for an answer (or abandoned)",
    "complete": "complete",
    "error": "ended with an error result",
    "task": "a task, its body not run yet (or lost)",
    "failed": "a task that failed with a JSON-RPC error",
    "cancelled": "a task, cancelled",
}


def when(ts: float | None) -> str:
    if ts is None:
        return "?"
    moment = datetime.fromtimestamp(ts, UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}"


def layout(title: str, body: str, base: str, token: str) -> str:
    """A whole page: the title, the body, this package's stylesheet and script."""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="journal-ui-token" content="{attr(token)}">'
        f"<title>{html.escape(title)}</title>"
        f'<link rel="stylesheet" href="{attr(base)}/static/journal.css">'
        f'<script src="{attr(base)}/static/journal.js" defer></script>'
        f'</head><body><header><a class="home" href="{attr(base)}/">Journal</a></header>'
        f"<main>{body}</main></body></html>"
    )


# --- the calls list -------------------------------------------------------------------------


def filters_form(base: str, given: Mapping[str, str]) -> str:
    def field(name: str, label: str, hint: str) -> str:
        value = attr(given.get(name, ""))
        return (
            f'<label>{label} <input name="{name}" value="{value}" placeholder="{attr(hint)}">'
            "</label>"
        )

    chosen = given.get("outcome", "")
    options = "".join(
        f'<option value="{name}"{" selected" if name == chosen else ""}>{name}</option>'
        for name in ("", *OUTCOMES)
    )
    return (
        f'<form class="filters" id="filters" method="get" action="{attr(base)}/">'
        + field("tool", "Tool", "any")
        + field("principal", "Principal", "any")
        + field("server", "Server", "any")
        + f'<label>Outcome <select name="outcome">{options}</select></label>'
        + field("since", "Active since", "2h, 1d or 2026-05-01T10:00")
        + field("until", "until", "now")
        + '<button type="submit">Filter</button></form>'
    )


def call_rows(base: str, listed: Sequence[ListedCall]) -> str:
    """The rows of the calls table (also what the page fetches to update itself)."""
    if not listed:
        return '<tr class="none"><td colspan="8">No recorded calls match.</td></tr>'
    rows = []
    for row in listed:
        summary, source = row.summary, row.source
        principal = source.principal
        rows.append(
            f'<tr data-call-id="{attr(summary.call_id)}">'
            f'<td class="id"><a href="{attr(call_url(base, summary.call_id))}">'
            f"{text(summary.call_id, 80)}</a></td>"
            f'<td class="tool">{text(summary.target or "?", 200)}</td>'
            f'<td class="rounds num">{source.rounds}</td>'
            f'<td class="last kind-{attr(summary.last_kind or "")}">'
            f"{text(summary.last_kind or '?', 40)}</td>"
            f'<td class="principal">{text(principal, 200) if principal is not None else "-"}</td>'
            f'<td class="server">{text(source.server or "?", 200)}</td>'
            f'<td class="first">{when(summary.first_ts)}</td>'
            f'<td class="last-ts">{when(summary.last_ts)}</td></tr>'
        )
    return "".join(rows)


def calls_page(
    base: str,
    token: str,
    page: Page,
    given: Mapping[str, str],
    *,
    problem: str | None,
    sealed_hint: bool,
) -> str:
    kept = {k: v for k, v in given.items() if v and k != "before"}
    rows_query = urlencode({**kept, "rows": "1"})
    paged = "before" in given
    poll = "" if paged else f' data-poll="{attr(base)}/?{attr(rows_query)}"'
    parts = ["<h1>Recorded calls</h1>", filters_form(base, given)]
    if problem:
        parts.append(f'<p class="problem">{text(problem, 600)}</p>')
    parts.append(
        '<table class="calls"><thead><tr><th>Call</th><th>Tool</th><th>Rounds</th>'
        "<th>Last</th><th>Principal</th><th>Server</th><th>First (UTC)</th>"
        f'<th>Last active (UTC)</th></tr></thead><tbody id="calls"{poll}>'
        + call_rows(base, page.calls)
        + "</tbody></table>"
    )
    pager = []
    if paged:
        pager.append(f'<a id="newest" href="{attr(base)}/?{attr(urlencode(kept))}">Newest</a>')
    if page.next_before is not None:
        older = urlencode({**kept, "before": repr(page.next_before)})
        pager.append(f'<a id="older" href="{attr(base)}/?{attr(older)}">Older →</a>')
    if pager:
        parts.append(f'<nav class="pager">{" ".join(pager)}</nav>')
    if page.scanned_out:
        parts.append(
            f'<p class="note">This page looked at {SCANNED_AT_MOST} calls for the server, '
            "principal or outcome asked for; Older goes on from there.</p>"
        )
    if sealed_hint:
        parts.append(
            f'<p class="note">Principals shown as {SEALED} are sealed: start the page with the '
            "server's keys (--keys-file PATH or ENGINE_KEYS) to show them.</p>"
        )
    return layout("Recorded calls", "".join(parts), base, token)


# --- one call --------------------------------------------------------------------------------


def call_page(
    base: str,
    token: str,
    call: RecordedCall,
    *,
    problem: str | None,
    task: TaskRow | None,
    replay_app: str | None,
    replay_anywhere: bool,
    trace_url: str | None = None,
) -> str:
    rounds = call.rounds
    first, last = rounds[0], rounds[-1]
    servers = sorted({str(e["server"]) for e in call.events if isinstance(e.get("server"), str)})
    sealed = any(e.get(SEALED_PAYLOAD) for e in call.events)
    facts = [
        ("Call", text(call.call_id, 200)),
        ("Tool", f"{text(call.method, 80)} {text(call.target, 200)}"),
        ("Rounds", f"{len(rounds)}, {html.escape(STATES.get(last.kind, last.kind))}"),
        ("Started (UTC)", when(first.ts)),
        ("Server", text(", ".join(servers), 400) if servers else "?"),
    ]
    principal = call.principal
    if principal is not None:
        facts.append(("Principal", text(principal, 400)))
    elif sealed:
        facts.append(("Principal", SEALED))
    redacted = sorted({name for r in rounds for name in r.redacted})
    if redacted:
        facts.append(
            ("Redacted", text(", ".join(redacted), 400) + " (never journaled; replay needs them)")
        )
    codes = list(dict.fromkeys(r.code for r in rounds if r.code))
    if codes:
        facts.append(("Code", text(" then ".join(codes), 400)))
    parts = [f"<h1>Call {text(call.call_id, 80)}</h1>"]
    if problem:
        parts.append(f'<p class="problem" id="keys-problem">{text(problem, 600)}</p>')
    parts.append(
        '<dl class="facts">'
        + "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in facts)
        + "</dl>"
    )
    if not sealed:
        arguments, missing = call.arguments, call.arguments_missing
        parts.append("<h2>Arguments</h2>")
        parts.append(
            json_block(arguments)
            if arguments is not None
            else f'<p class="note">{text(missing[:1].upper() + missing[1:], 300)}.</p>'
        )
    parts.append("<h2>Timeline</h2>")
    parts.append(timeline_svg(call))
    if task is not None or any(r.kind in ("task", "cancelled") for r in rounds):
        parts.append(task_section(call, task))
    parts.append("<h2>Rounds</h2>")
    taken = took_over(call.events_by_round)
    for recorded, event in zip(rounds, call.events_by_round, strict=True):
        parts.append(round_section(recorded, event, first, recorded.round in taken, trace_url))
    parts.append(replay_form(base, call, replay_app, replay_anywhere, sealed))
    parts.append(
        f'<h2>Export</h2><p><a id="export" href="{attr(call_url(base, call.call_id))}/export" '
        f"download>Download the call as JSON</a> (what <code>python -m engine export</code> "
        "writes: a fixture for replay and tests).</p>"
    )
    return layout(f"Call {call.call_id[:16]}", "".join(parts), base, token)


def task_section(call: RecordedCall, task: TaskRow | None) -> str:
    items = []
    if task is not None:
        items.append(
            f'<li id="task-now">Now: {text(task.status, 40)}, written {task.version} times, '
            f"last at {when(task.updated)} UTC</li>"
        )
    taken = took_over(call.events_by_round)
    for recorded, event in zip(call.rounds, call.events_by_round, strict=True):
        replica = text(recorded.replica or "?", 100)
        hold = event.get("hold")
        held = f" under hold {int(hold)}" if isinstance(hold, int) else ""
        if recorded.kind == "task":
            items.append(f"<li>Round {recorded.round}: made on {replica}; its body runs next</li>")
        elif recorded.kind == "cancelled":
            items.append(f'<li class="cancel">Round {recorded.round}: cancelled</li>')
        elif recorded.round in taken:
            items.append(
                f'<li class="takeover">Round {recorded.round}: taken over by {replica}{held} '
                "(the run before it neither finished nor gave the task back: its replica "
                f"died, paused or lost the store); the run came to {text(recorded.kind, 40)}</li>"
            )
        elif "task" in event:
            items.append(
                f"<li>Round {recorded.round}: run on {replica}{held}, came to "
                f"{text(recorded.kind, 40)}</li>"
            )
    return f'<h2>Task</h2><ul class="task" id="task">{"".join(items)}</ul>'


def round_section(
    recorded: RecordedRound,
    event: Mapping[str, Any],
    first: RecordedRound,
    taken: bool,
    trace_url: str | None = None,
) -> str:
    offset = (
        f"+{recorded.ts - first.ts:.3f} s"
        if recorded.ts is not None and first.ts is not None
        else "?"
    )
    took = f"{recorded.duration_ms:.1f} ms" if recorded.duration_ms is not None else "?"
    head = (
        f"Round {recorded.round} · {text(recorded.kind, 40)} · replica "
        f"{text(recorded.replica or '?', 100)} · {offset} · {took}"
        + (" · taken over" if taken else "")
    )
    body = []
    trace_id = event.get("trace_id")
    if isinstance(trace_id, str) and trace_id:
        body.append(f'<p class="trace">Trace {trace_link(trace_id, trace_url)}</p>')
    if event.get(SEALED_PAYLOAD):
        body.append(
            f'<p class="sealed">{SEALED}: its questions, answers and result need the '
            "server's keys.</p>"
        )
    if recorded.truncated:
        parts = ", ".join(f"{name} ({size} bytes)" for name, size in recorded.truncated.items())
        body.append(
            f'<p class="problem">Truncated: {text(parts)} left out of the journal (over '
            "journal_max_event_bytes); this round cannot be replayed exactly.</p>"
        )
    for key, answer in recorded.answers.items():
        body.append(f"<h4>Answer {text(key, 200)}</h4>{json_block(answer)}")
    for key, value in recorded.checkpoints.items():
        body.append(f"<h4>Once {text(key, 200)}</h4>{json_block(value)}")
    for key, question in recorded.questions.items():
        body.append(f"<h4>Question {text(key, 200)}</h4>{json_block(question)}")
    if recorded.kind == "failed" and isinstance(recorded.result, dict):
        body.append(f"<h4>Failed</h4>{json_block(recorded.result.get('error'))}")
    elif recorded.kind not in ("input_required", "cancelled", "task") and not event.get(
        SEALED_PAYLOAD
    ):
        label = "Error" if recorded.kind == "error" else "Result"
        body.append(f"<h4>{label}</h4>{json_block(recorded.result)}")
    return (
        f'<section class="round" id="round-{recorded.round}"><h3>{head}</h3>'
        + "".join(body)
        + "</section>"
    )


def trace_link(trace_id: str, template: str | None) -> str:
    """The trace id, a link when a trace URL template (``...{trace_id}...``) was given."""
    shown = text(trace_id, 64)
    if template is None:
        return f"<code>{shown}</code>"
    href = template.replace("{trace_id}", quote(trace_id, safe=""))
    return f'<a class="trace-link" href="{attr(href)}" rel="noreferrer"><code>{shown}</code></a>'


def message_page(base: str, token: str, title: str, message: str) -> str:
    return layout(
        title,
        f'<h1>{html.escape(title)}</h1><p class="problem">{text(message, 2000)}</p>',
        base,
        token,
    )


__all__ = [
    "call_page",
    "call_rows",
    "calls_page",
    "layout",
    "message_page",
]
