"""A call's rounds on a timeline, as an SVG drawn on the server from the journal.

One lane per replica that served a round, in the order they first did, and above them the
client's lane: a bar per round from its arrival (its end less its duration) to its answer, and
in the client's lane the gaps where the client was answering the questions of the round
before. A task's run that took the task over from another run is marked. Times scale linearly
from the call's first arrival to its last answer; a round too short to see is drawn a few
pixels wide (its tooltip gives its duration).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine._internal.inert import inert
from engine.debug.journal import RecordedCall, RecordedRound

WIDTH = 960
LABEL = 170
LANE = 30
TOP = 26
MIN_BAR = 4.0
RIGHT = 110
"""Room right of the last bar for its label."""
CLIENT = "client"


@dataclass(frozen=True)
class Bar:
    """One stretch of time in a lane."""

    lane: str
    start: float
    end: float
    label: str
    title: str
    css: str


def took_over(events: Sequence[Mapping[str, Any]]) -> set[int]:
    """The rounds whose run took their task over from a run that neither finished nor gave it
    back: the task's count of takeovers went up at them."""
    found: set[int] = set()
    before = 0
    for event in events:
        count = event.get("takeovers")
        number = event.get("round")
        if isinstance(count, int) and isinstance(number, int):
            if count > before:
                found.add(number)
            before = max(before, count)
    return found


def bars(call: RecordedCall) -> list[Bar]:
    taken = took_over(call.events_by_round)
    out: list[Bar] = []
    previous: RecordedRound | None = None
    for recorded in call.rounds:
        if recorded.ts is None:
            continue
        took = (recorded.duration_ms or 0.0) / 1000
        start = recorded.ts - took
        if previous is not None and previous.ts is not None and previous.kind == "input_required":
            waited = start - previous.ts
            out.append(
                Bar(
                    CLIENT,
                    previous.ts,
                    start,
                    "answering",
                    f"the client answered round {previous.round}'s questions in {waited:.3f} s",
                    "gap",
                )
            )
        replica = recorded.replica or "?"
        label = f"R{recorded.round}"
        css = f"bar kind-{_token(recorded.kind)}"
        title = (
            f"round {recorded.round} on {replica}: {recorded.kind}, "
            f"{recorded.duration_ms if recorded.duration_ms is not None else '?'} ms"
        )
        if recorded.round in taken:
            css += " takeover"
            label += " taken over"
            title += " (took the task over from a run that neither finished nor gave it back)"
        out.append(Bar(replica, start, recorded.ts, label, title, css))
        previous = recorded
    return out


def _token(kind: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "-" for c in kind)[:32]


def timeline_svg(call: RecordedCall) -> str:
    """The SVG (an element to put in a page): lanes, bars, a time axis."""
    drawn = bars(call)
    if not drawn:
        return '<p class="note">The journal has no times for this call: no timeline.</p>'
    lanes = [CLIENT] if any(bar.lane == CLIENT for bar in drawn) else []
    lanes += list(dict.fromkeys(bar.lane for bar in drawn if bar.lane != CLIENT))
    t0 = min(bar.start for bar in drawn)
    t1 = max(bar.end for bar in drawn)
    span = max(t1 - t0, 1e-6)
    scale = (WIDTH - LABEL - RIGHT) / span
    height = TOP + LANE * len(lanes) + 8
    parts = [
        f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-label="rounds of the call on a timeline, one lane per replica">',
        f'<text class="axis" x="{LABEL}" y="14">0 s</text>',
        f'<text class="axis" x="{WIDTH - RIGHT}" y="14" text-anchor="end">{span:.3f} s</text>',
    ]
    for index, lane in enumerate(lanes):
        y = TOP + index * LANE
        kind = "client" if lane == CLIENT else "replica"
        name = "client (answering)" if lane == CLIENT else f"replica {lane}"
        parts.append(
            f'<g class="lane {kind}" data-lane="{html.escape(inert(lane), quote=True)}">'
            f'<rect class="lane-bg" x="0" y="{y}" width="{WIDTH}" height="{LANE - 4}"/>'
            f'<text class="lane-name" x="6" y="{y + 17}">{html.escape(inert(name)[:28])}</text>'
        )
        for bar in (b for b in drawn if b.lane == lane):
            x = LABEL + (bar.start - t0) * scale
            width = max((bar.end - bar.start) * scale, MIN_BAR)
            parts.append(
                f'<g class="{bar.css}"><title>{html.escape(inert(bar.title))}</title>'
                f'<rect x="{x:.1f}" y="{y + 3}" width="{width:.1f}" height="{LANE - 10}" rx="2"/>'
                f'<text x="{x + width + 4:.1f}" y="{y + 17}">{html.escape(bar.label)}</text></g>'
            )
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


__all__ = ["Bar", "bars", "timeline_svg", "took_over"]
