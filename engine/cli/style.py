"""Terminal output: colour and a progress bar redrawn in place on a TTY, plain lines otherwise.

Escape codes are written only to a terminal, and not when ``NO_COLOR`` is set (or ``TERM`` is
``dumb``); piped output is plain text, one line per event. The only escape codes written are
these: what a server sent (a log message, a progress note) is made inert first.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, TextIO

from engine._internal.inert import inert

LEVEL_COLOURS = {"debug": "2", "info": "", "notice": "36", "warning": "33"}
"""SGR codes per log level; ``error`` and above are red."""


@dataclass
class Style:
    colour: bool

    @classmethod
    def for_stream(cls, stream: TextIO) -> Style:
        tty = hasattr(stream, "isatty") and stream.isatty()
        plain = "NO_COLOR" in os.environ or os.environ.get("TERM") == "dumb"
        return cls(colour=tty and not plain)

    def paint(self, code: str, text: str) -> str:
        """``text``, inert, in colour on a terminal."""
        text = inert(text)
        return f"\x1b[{code}m{text}\x1b[0m" if self.colour and code else text

    def header(self, text: str) -> str:
        return self.paint("1;34", text)

    def bold(self, text: str) -> str:
        return self.paint("1", text)

    def error(self, text: str) -> str:
        return self.paint("1;31", text)

    def level(self, level: str, text: str) -> str:
        return self.paint(LEVEL_COLOURS.get(level, "31"), text)


class Live:
    """Shows ``notifications/progress`` and ``notifications/message`` while a call runs.

    On a terminal the progress line is a bar redrawn in place (a log line is written above it);
    elsewhere each notification is one plain line.
    """

    WIDTH = 30

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.style = Style.for_stream(self.stream)
        self.tty = self.style.colour
        self.drawn = ""

    def __call__(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/progress":
            self.progress(params)
        elif method == "notifications/message":
            self.message(params)

    def progress(self, params: dict[str, Any]) -> None:
        done, total = params.get("progress"), params.get("total")
        message = params.get("message")
        number = _number(done)
        whole = _number(total)
        amount = f"{number:g}" if number is not None else "?"
        if whole:
            amount = f"{amount}/{whole:g}"
        note = f" {inert(message)}" if isinstance(message, str) and message else ""
        if not self.tty:
            self._line(f"  progress {amount}{note}")
            return
        share = min(max((number or 0) / whole, 0.0), 1.0) if whole else 0.0
        filled = round(share * self.WIDTH)
        bar = "█" * filled + "░" * (self.WIDTH - filled)
        percent = f" {share:4.0%}" if whole else ""
        self.drawn = f"  {bar}{percent} {amount}{note}"
        self.stream.write("\r\x1b[2K" + self.drawn)
        self.stream.flush()

    def message(self, params: dict[str, Any]) -> None:
        level = str(params.get("level", "info"))
        data = params.get("data")
        text = data if isinstance(data, str) else _json(data)
        logger = f" {params['logger']}" if params.get("logger") else ""
        self._line(self.style.level(level, inert(f"  log {level}{logger}: {text}")))

    def status(self, message: str) -> None:
        """A working task's status message (its body's progress), as a line of its own."""
        self._line(f"  status: {message}")

    def _line(self, text: str) -> None:
        """A line above the progress bar; ``text`` is already inert (and perhaps painted)."""
        if self.tty and self.drawn:
            self.stream.write("\r\x1b[2K" + text + "\n" + self.drawn)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def done(self) -> None:
        """End the progress line, so what follows starts on a line of its own."""
        if self.tty and self.drawn:
            self.stream.write("\n")
            self.stream.flush()
        self.drawn = ""


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)
