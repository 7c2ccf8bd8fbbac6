"""Replay on a call's page: the form that starts it, and the report it comes back with, the
first divergence as the recorded value beside the live one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from engine.debug.journal import RecordedCall
from engine.debug.web.markup import attr, side_by_side, text


def call_url(base: str, call_id: str) -> str:
    return f"{base}/call/{quote(call_id, safe='')}"


def replay_form(
    base: str, call: RecordedCall, app: str | None, anywhere: bool, sealed: bool
) -> str:
    intro = (
        "<h2>Replay</h2><p>Re-run every recorded round against the code of a server file, as "
        "<code>python -m engine replay</code> does: nothing is written to the store, and "
        "<code>once</code> steps are served from the record.</p>"
    )
    if sealed:
        return intro + '<p class="note">The call is sealed: replay needs the keys.</p>'
    if not anywhere and app is None:
        return intro + (
            '<p class="note">Replay from this page runs the server file the page was given '
            '(journal_ui_app(..., replay_app="server.py")); none was.</p>'
        )
    action = attr(call_url(base, call.call_id)) + "/replay"
    if anywhere:
        field = (
            '<label>Server file <input name="app" id="replay-app" size="60" '
            f'value="{attr(app or "")}" placeholder="server.py or server.py:mcp"></label>'
        )
    else:
        field = f"<p>Against {text(app or '', 400)}</p>"
    return (
        intro + f'<form id="replay" class="replay" method="post" action="{action}">{field}'
        '<button type="submit">Replay</button></form><div id="replay-result"></div>'
    )


def replay_result(report: Mapping[str, Any] | None, problem: str | None) -> str:
    """The fragment the replay form shows: the report, or why there is none (one line)."""
    if report is None:
        return (
            f'<p class="problem" id="replay-problem">{text(problem or "replay failed", 2000)}</p>'
        )
    ok = bool(report.get("ok"))
    parts = [
        f'<p class="verdict {"ok" if ok else "diverged"}" id="replay-verdict">'
        + ("Every replayed round matches the record." if ok else "The live code diverges.")
        + "</p>"
    ]
    for warning in report.get("warnings") or []:
        parts.append(f'<p class="note">{text(str(warning), 1000)}</p>')
    checks = []
    for check in report.get("rounds") or []:
        if isinstance(check, dict):
            state = "ok" if check.get("matched") else "DIVERGED"
            checks.append(
                f"<li>Round {int(check.get('round', 0))}: {state} "
                f"({text(str(check.get('live_kind')), 40)})</li>"
            )
    if checks:
        parts.append(f'<ul class="checks">{"".join(checks)}</ul>')
    divergence = report.get("divergence")
    if isinstance(divergence, dict):
        key = divergence.get("key")
        where = f"round {int(divergence.get('round', 0))}" + (
            f", question {text(str(key), 200)}" if key else ""
        )
        parts.append(
            f'<h3 id="divergence">First divergence: {where}</h3>'
            f"<p>{text(str(divergence.get('summary', '')), 1000)}</p>"
            + side_by_side(divergence.get("recorded"), divergence.get("live"))
        )
    return "".join(parts)


__all__ = ["call_url", "replay_form", "replay_result"]
