"""Text from a journal or a server made inert before it reaches a terminal.

A principal's ``sub``, a tool's result, a server's error message or a form's field name may
hold an escape sequence (which sets a window title, clears the screen, or on some terminals
writes to the clipboard), a carriage return or a newline (which draws a line of its own making),
or a bidi override (which shows text in another order than it is). Every command that prints
such data builds it from the functions here, and nothing else prints it.

What is escaped: every character of the Unicode categories Cc (C0 and C1 controls, DEL), Cf
(format: the bidi embeddings, overrides and isolates, the marks LRM, RLM and ALM, zero-width
characters, tags), Cs (a lone surrogate, which cannot even be encoded) and Zl/Zp (the line and
paragraph separators). Each is shown as its code, the way Python writes it: ``\\x1b``, ``\\n``,
``\\u202e``. A backslash is left as it is, so making a text inert twice changes nothing; a
``\\x1b`` on screen is the escape or the four characters, never an escape that acted.

Two forms: :func:`inert` is one line, for a table cell or a line of a report, and escapes line
breaks too, so a value cannot start a line that looks like one of the command's own;
:func:`inert_lines` is a block (a tool's result text), split at its line breaks into lines a
printer indents under a label, each inert, tabs expanded to spaces. JSON output (``--json``,
``export``) is :func:`inert_json`: the same characters written as JSON escapes (``\\u001b``),
so it decodes to the same data.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""The Unicode categories escaped (see the module's docstring)."""

_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_SUSPECT = re.compile(r"[^\x20-\x7e]")
"""Outside printable ASCII: looked up one by one (most text never gets here)."""
_SUSPECT_IN_JSON = re.compile(r"[^\x20-\x7e\n]")
"""The same in ``json.dumps`` output, whose raw newlines are its indentation."""
_LINE_BREAK = re.compile(r"\r?\n")


def is_unsafe(char: str) -> bool:
    return unicodedata.category(char) in UNSAFE_CATEGORIES


def _code(char: str) -> str:
    point = ord(char)
    if point < 0x100:
        return f"\\x{point:02x}"
    if point < 0x10000:
        return f"\\u{point:04x}"
    return f"\\U{point:08x}"


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if not is_unsafe(char):
        return char
    return _SHORT.get(char) or _code(char)


def inert(text: str) -> str:
    """``text`` as one line safe to print: control, format and line-break characters escaped
    (a newline as ``\\n``)."""
    if text.isprintable():  # no Cc, Cf, Cs, Zl or Zp in it: the common case
        return text
    return _SUSPECT.sub(_escaped, text)


def inert_lines(text: str) -> list[str]:
    """A multi-line value as the lines a printer shows, each inert: split at ``\\n`` and
    ``\\r\\n`` only (a lone ``\\r`` or a separator is shown as its code), tabs expanded to
    spaces (every 8 columns), no last empty line for a final newline; ``[]`` for ``""``."""
    if not text:
        return []
    lines = _LINE_BREAK.split(text)
    if lines[-1] == "":
        lines.pop()
    return [inert(line.expandtabs()) for line in lines]


def _json_escaped(match: re.Match[str]) -> str:
    char = match.group()
    if not is_unsafe(char):
        return char
    point = ord(char)
    if point < 0x10000:
        return f"\\u{point:04x}"
    point -= 0x10000  # a UTF-16 surrogate pair, as JSON writes such a character
    return f"\\u{0xD800 + (point >> 10):04x}\\u{0xDC00 + (point & 0x3FF):04x}"


def inert_json(value: Any, *, indent: int | None = None, sort_keys: bool = False) -> str:
    """``value`` as JSON in which every unsafe character is a ``\\uXXXX`` escape (other text,
    accented letters say, stays readable): ``json.loads`` gives back the same value."""
    text = json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=sort_keys)
    return _SUSPECT_IN_JSON.sub(_json_escaped, text)


__all__ = ["UNSAFE_CATEGORIES", "inert", "inert_json", "inert_lines", "is_unsafe"]
