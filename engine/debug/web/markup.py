"""Recorded values as HTML that does nothing but show them.

Anything in a journal came from a client or from a tool: a ``<script>`` element, an escape
sequence, a bidi override, a megabyte of text. Every value reaches a page through
:func:`text` or :func:`json_block`: markup escaped (:func:`html.escape`, quotes included, so a
value is safe in an attribute too), control and format characters shown as their codes the
way the terminal commands show them (:mod:`engine._internal.inert`) and marked so a reader
tells the code from the same characters typed, and a long string cut to
:data:`SHOWN_CHARS` characters with how many were left out (the export has all of it).
"""

from __future__ import annotations

import difflib
import html
import re
from typing import Any

from engine._internal.inert import inert, inert_json

SHOWN_CHARS = 4000
"""Characters of one string shown on a page; the rest is counted, not drawn."""
SHOWN_BLOCK_CHARS = 100_000
"""Characters of one JSON block shown on a page."""

_CODE = re.compile(r"\\(x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8}|[nrt])")


def attr(value: str) -> str:
    """Text of this package's own making, for an attribute value or an element."""
    return html.escape(value, quote=True)


def text(value: str, limit: int = SHOWN_CHARS) -> str:
    """One line of HTML showing ``value``: escaped, its control characters as marked codes."""
    shown, cut = _cut(value, limit)
    out = _marked(html.escape(inert(shown), quote=True), value)
    return out + _more(cut)


def _cut(value: str, limit: int) -> tuple[str, int]:
    if len(value) <= limit:
        return value, 0
    return value[:limit], len(value) - limit


def _more(cut: int) -> str:
    if not cut:
        return ""
    return f'<span class="cut">… {cut:,} more characters (the export has all of them)</span>'


def _marked(escaped: str, original: str) -> str:
    """The codes :func:`inert` wrote, marked; a value that needed none is left as it is."""
    if original.isprintable():
        return escaped
    return _CODE.sub(lambda m: f'<span class="ctl">{m.group()}</span>', escaped)


def shortened(value: Any, limit: int = SHOWN_CHARS) -> Any:
    """``value`` with every string longer than ``limit`` cut, saying how much was cut."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        return value[:limit] + f"… ({len(value) - limit:,} more characters)"
    if isinstance(value, dict):
        return {str(k): shortened(v, limit) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [shortened(v, limit) for v in value]
    return value


def json_text(value: Any) -> str:
    """``value`` as indented, sorted JSON, its control characters as JSON escapes, long strings
    cut: the text a page shows (not HTML yet)."""
    return inert_json(shortened(value), indent=2, sort_keys=True)


def json_block(value: Any) -> str:
    """A ``<pre>`` of ``value`` as JSON (see :func:`json_text`)."""
    shown, cut = _cut(json_text(value), SHOWN_BLOCK_CHARS)
    return f'<pre class="json">{html.escape(shown)}</pre>' + _more(cut)


def side_by_side(recorded: Any, live: Any) -> str:
    """A table of the recorded value beside the live one, as JSON lines, what differs marked."""
    a = json_text(recorded).split("\n") if recorded is not None else ["(nothing)"]
    b = json_text(live).split("\n") if live is not None else ["(nothing)"]
    rows: list[str] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        left, right = a[i1:i2], b[j1:j2]
        for n in range(max(len(left), len(right))):
            was = left[n] if n < len(left) else None
            now = right[n] if n < len(right) else None
            mark = "same" if tag == "equal" else "changed"
            rows.append(f'<tr class="{mark}">{_cell(was, "recorded")}{_cell(now, "live")}</tr>')
    return (
        '<table class="diff"><thead><tr><th>recorded</th><th>live</th></tr></thead><tbody>'
        + "".join(rows)
        + "</tbody></table>"
    )


def _cell(line: str | None, side: str) -> str:
    if line is None:
        return f'<td class="{side} empty"></td>'
    return f'<td class="{side}"><code>{html.escape(line)}</code></td>'


__all__ = ["SHOWN_CHARS", "attr", "json_block", "json_text", "shortened", "side_by_side", "text"]
