"""URI templates (RFC 6570) read backwards: which values a concrete URI gives a template's
variables, so that ``resources/read`` can route a URI to the function behind a template.

RFC 6570 defines expansion only; matching is its inverse, and is ambiguous in general. The
templates accepted here are the ones whose inverse is well defined:

- Levels 1 to 3 (``{var}``, ``{+var}``, ``{#var}``, ``{.var}``, ``{/var}``, ``{;var}``,
  ``{?var}``, ``{&var}``, several variables to an expression) and the explode modifier on
  ``.``, ``/`` and ``;`` (``{/segments*}`` gives a list). Prefix modifiers (``{var:3}``) and
  exploded query variables are refused.
- At most one variable that may span several segments (``{+var}``, ``{#var}`` or an exploded
  one), and never two variables with nothing between them: either would leave no place to
  split the URI.
- Each variable appears once.

A trailing ``{?a,b}`` (with ``{&c}`` after it) is matched as a query string: in any order, with
parameters missing (absent from the result, so the function's default applies) or unknown
(ignored). Values come back percent-decoded.

Matching never backtracks. Without a multi-segment variable the URI is read from its end: each
variable ends where the next literal begins and starts after the nearest earlier occurrence of
the literal before it (so the first variable takes what is left, as a greedy regular expression
would). With one, the part after it is read that way from the end, the part before it from the
start (each variable stopping at the first occurrence of the literal after it), and the
multi-segment variable takes the middle. The work is linear in the URI for a given template.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import unquote

Operator = Literal["", "+", "#", ".", "/", ";", "?", "&"]

MAX_TEMPLATE_CHARS = 8_192
MAX_VARIABLES = 256
MAX_URI_CHARS = 65_536
"""A longer URI matches no template, unread."""

_NAME = re.compile(r"[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*")


@dataclass(frozen=True, slots=True)
class _Style:
    """How an operator writes its variables (RFC 6570, appendix A)."""

    first: str
    """Written before the first variable that has a value."""
    between: str
    """Written between variables, and between the items of an exploded list."""
    named: bool
    """``name=value`` rather than the bare value."""
    stops: str
    """Characters a single value never contains in a URI: where a variable's match ends."""


_STYLES: dict[str, _Style] = {
    "": _Style("", ",", False, "/?#&,"),
    "+": _Style("", ",", False, "?#"),
    "#": _Style("#", ",", False, ""),
    ".": _Style(".", ".", False, "./?#"),
    "/": _Style("/", "/", False, "/?#"),
    ";": _Style(";", ";", True, ";/?#"),
    "?": _Style("?", "&", True, "&#"),
    "&": _Style("&", "&", True, "&#"),
}


class InvalidUriTemplate(ValueError):
    """A resource URI that is not a template this server can match; ``position`` is where in
    ``template`` the fault is, when it is at one place."""

    def __init__(self, message: str, *, template: str, position: int | None = None) -> None:
        super().__init__(message)
        self.template = template
        self.position = position


@dataclass(frozen=True, slots=True)
class Variable:
    name: str
    operator: Operator
    explode: bool = False

    @property
    def spans_segments(self) -> bool:
        """Whether its value may cross the separators other variables stop at."""
        return self.explode or self.operator in ("+", "#")


@dataclass(frozen=True, slots=True)
class _Text:
    text: str


@dataclass(frozen=True, slots=True)
class _Slot:
    variable: Variable
    bare_when_empty: bool = False
    """``{;x}``: an empty value is written ``;x``, not ``;x=``; the ``=value`` is in the slot."""


_Piece = _Text | _Slot


@dataclass(frozen=True, slots=True)
class UriTemplate:
    """A parsed template (:meth:`parse`); equal to another of the same text."""

    template: str
    variables: tuple[Variable, ...] = field(compare=False, repr=False)
    _before: tuple[_Piece, ...] = field(compare=False, repr=False)
    """What precedes the multi-segment variable (everything, when there is none)."""
    _spanning: Variable | None = field(compare=False, repr=False)
    _after: tuple[_Piece, ...] = field(compare=False, repr=False)
    _query: tuple[Variable, ...] = field(compare=False, repr=False)
    """Variables of a trailing ``{?...}``, matched as an unordered, partial query string."""

    @staticmethod
    def is_template(uri: str) -> bool:
        """Whether ``uri`` has an expression: a ``{`` with a ``}`` after it."""
        opening = uri.find("{")
        return opening != -1 and uri.find("}", opening) != -1

    @classmethod
    def parse(cls, template: str) -> UriTemplate:
        """Raises :class:`InvalidUriTemplate` naming what to change."""
        if len(template) > MAX_TEMPLATE_CHARS:
            raise InvalidUriTemplate(
                f"Template is longer than {MAX_TEMPLATE_CHARS} characters", template=template
            )
        parts = _split(template)
        variables = tuple(v for part in parts if isinstance(part, list) for v in part)
        _check_names(template, variables)
        if sum(1 for part in parts if isinstance(part, list) and part[0].operator == "?") > 1:
            raise InvalidUriTemplate(
                "More than one {?...} expression: put the query variables in one, {?a,b}, or "
                "continue it with {&b}",
                template=template,
            )
        path_parts, query = _query_tail(parts)
        before, spanning, after = _around_spanning(template, _pieces(path_parts))
        return cls(template, variables, before, spanning, after, query)

    @property
    def variable_names(self) -> list[str]:
        return [v.name for v in self.variables]

    @property
    def query_variable_names(self) -> frozenset[str]:
        """The variables a matching URI may leave out: its function needs defaults for them."""
        return frozenset(v.name for v in self._query)

    def match(self, uri: str) -> dict[str, str | list[str]] | None:
        """The decoded value of each variable ``uri`` gives, or ``None`` when it does not fit."""
        if len(uri) > MAX_URI_CHARS:
            return None
        if not self._query:
            return self._match_path(uri)
        path, _, query = uri.partition("#")[0].partition("?")
        values = self._match_path(path)
        if values is None:
            return None
        given = _query_values(query)
        for variable in self._query:
            if variable.name in given:
                values[variable.name] = given[variable.name]
        return values

    def _match_path(self, uri: str) -> dict[str, str | list[str]] | None:
        spanning = self._spanning
        if spanning is None:
            read = _read_backwards(self._before, uri, len(uri), anchored=True)
            return read[0] if read is not None and read[1] == 0 else None
        tail = _read_backwards(self._after, uri, len(uri), anchored=False)
        if tail is None:
            return None
        tail_values, tail_start = tail
        head = _read_forwards(self._before, uri, tail_start)
        if head is None:
            return None
        head_values, head_end = head
        middle = _spanning_value(spanning, uri[head_end:tail_start])
        if middle is None:
            return None
        return {**head_values, spanning.name: middle, **tail_values}

    def __str__(self) -> str:
        return self.template


def _split(template: str) -> list[str | list[Variable]]:
    """The template as literal text and expressions (each a list of its variables)."""
    parts: list[str | list[Variable]] = []
    count = 0
    at = 0
    while at < len(template):
        opening = template.find("{", at)
        if opening == -1:
            parts.append(template[at:])
            break
        if opening > at:
            parts.append(template[at:opening])
        closing = template.find("}", opening)
        if closing == -1:
            raise InvalidUriTemplate(
                f"Unclosed expression at position {opening}: close it with '}}'",
                template=template,
                position=opening,
            )
        expression = _expression(template, template[opening + 1 : closing], opening)
        count += len(expression)
        if count > MAX_VARIABLES:
            raise InvalidUriTemplate(
                f"Template has more than {MAX_VARIABLES} variables", template=template
            )
        parts.append(expression)
        at = closing + 1
    return parts


def _expression(template: str, body: str, position: int) -> list[Variable]:
    def refuse(problem: str) -> InvalidUriTemplate:
        return InvalidUriTemplate(
            f"{problem} (the expression at position {position})",
            template=template,
            position=position,
        )

    operator: Operator = ""
    if body and body[0] in "+#./;?&":
        operator = body[0]  # type: ignore[assignment]  # one of the Operator literals
        body = body[1:]
    if not body:
        raise refuse("Empty expression: name a variable, as in {name}")
    variables = []
    for spec in body.split(","):
        explode = spec.endswith("*")
        name = spec[:-1] if explode else spec
        if ":" in name:
            raise refuse(f"Prefix modifier {spec!r} is not supported; match the whole value")
        if not _NAME.fullmatch(name):
            raise refuse(
                f"Invalid variable name {name!r}: use letters, digits and '_' (dots between)"
            )
        if explode and operator in ("", "+", "#", "?", "&"):
            raise refuse(
                f"The explode modifier on {{{operator}{spec}}} cannot be matched; it is "
                "supported with '/', '.' and ';' only, as in {/segments*}"
            )
        variables.append(Variable(name, operator, explode))
    return variables


def _check_names(template: str, variables: tuple[Variable, ...]) -> None:
    seen: set[str] = set()
    for variable in variables:
        if variable.name in seen:
            raise InvalidUriTemplate(
                f"Variable {variable.name!r} appears more than once; give each its own name",
                template=template,
            )
        seen.add(variable.name)


def _query_tail(
    parts: list[str | list[Variable]],
) -> tuple[list[str | list[Variable]], tuple[Variable, ...]]:
    """Split off a trailing run of ``{?...}`` / ``{&...}`` expressions led by ``{?...}``, to be
    matched as a query string; not when the rest has a literal ``?`` or ``#`` (or a ``{?}`` or
    ``{#}``), whose split would not be the template's."""
    start = len(parts)
    while start > 0:
        part = parts[start - 1]
        if isinstance(part, str) or part[0].operator not in ("?", "&"):
            break
        start -= 1
    if start == len(parts):
        return parts, ()
    lead = parts[start]
    assert not isinstance(lead, str)
    if lead[0].operator != "?":
        return parts, ()
    for part in parts[:start]:
        if isinstance(part, str):
            if "?" in part or "#" in part:
                return parts, ()
        elif part[0].operator in ("?", "#"):
            return parts, ()
    query = tuple(v for part in parts[start:] if not isinstance(part, str) for v in part)
    return parts[:start], query


def _pieces(parts: list[str | list[Variable]]) -> list[_Piece]:
    """Literal text and one slot per variable, with each operator's punctuation made literal
    (adjacent texts joined, so that each is as long as it can be to anchor on)."""
    pieces: list[_Piece] = []

    def text(value: str) -> None:
        if not value:
            return
        if pieces and isinstance(pieces[-1], _Text):
            pieces[-1] = _Text(pieces[-1].text + value)
        else:
            pieces.append(_Text(value))

    for part in parts:
        if isinstance(part, str):
            text(part)
            continue
        for index, variable in enumerate(part):
            style = _STYLES[variable.operator]
            lead = style.first if index == 0 else style.between
            if variable.explode:  # an exploded value carries its own separators
                pieces.append(_Slot(variable))
            elif variable.operator == ";":
                text(lead + variable.name)
                pieces.append(_Slot(variable, bare_when_empty=True))
            elif style.named:
                text(f"{lead}{variable.name}=")
                pieces.append(_Slot(variable))
            else:
                text(lead)
                pieces.append(_Slot(variable))
    return pieces


def _around_spanning(
    template: str, pieces: list[_Piece]
) -> tuple[tuple[_Piece, ...], Variable | None, tuple[_Piece, ...]]:
    spanning_at: int | None = None
    for index, piece in enumerate(pieces):
        if not isinstance(piece, _Slot):
            continue
        previous = pieces[index - 1] if index else None
        if isinstance(previous, _Slot):
            raise InvalidUriTemplate(
                f"Variables {previous.variable.name!r} and {piece.variable.name!r} have "
                "nothing between them, so no URI says where one ends: put a literal between "
                "them, or use one variable",
                template=template,
            )
        if piece.variable.spans_segments:
            if spanning_at is not None:
                raise InvalidUriTemplate(
                    "More than one variable may span segments ({+var}, {#var} or an exploded "
                    "one), so no URI says which one takes a segment: keep one",
                    template=template,
                )
            spanning_at = index
    if spanning_at is None:
        return tuple(pieces), None, ()
    slot = pieces[spanning_at]
    assert isinstance(slot, _Slot)
    return tuple(pieces[:spanning_at]), slot.variable, tuple(pieces[spanning_at + 1 :])


def _read_backwards(
    pieces: tuple[_Piece, ...], uri: str, end: int, *, anchored: bool
) -> tuple[dict[str, str | list[str]], int] | None:
    """Match ``pieces`` so that they end at ``end``: their values and where they start.
    ``anchored``: the pieces are the whole template, so the first one starts at 0."""
    values: dict[str, str | list[str]] = {}
    at = end
    for index in range(len(pieces) - 1, -1, -1):
        piece = pieces[index]
        if isinstance(piece, _Text):
            if not uri.endswith(piece.text, 0, at):
                return None
            at -= len(piece.text)
            continue
        variable = piece.variable
        stops = _STYLES[variable.operator].stops
        earliest = at
        while earliest > 0 and uri[earliest - 1] not in stops:
            earliest -= 1
        previous = pieces[index - 1] if index else None
        if piece.bare_when_empty:  # the ";name" text before it is already in the URI
            assert isinstance(previous, _Text)
            if uri.endswith(previous.text, 0, at):
                values[variable.name] = ""
                continue
            equals = uri.find("=", earliest, at)
            if equals == -1:
                return None
            values[variable.name] = unquote(uri[equals + 1 : at])
            at = equals
            continue
        if previous is None:
            start = earliest
        else:
            assert isinstance(previous, _Text)
            if anchored and index == 1:  # the template's first text is at the URI's start
                start = len(previous.text)
                if not earliest <= start <= at:
                    return None
            else:
                found = uri.rfind(previous.text, 0, at)
                if found == -1 or found + len(previous.text) < earliest:
                    return None
                start = found + len(previous.text)
        values[variable.name] = unquote(uri[start:at])
        at = start
    return values, at


def _read_forwards(
    pieces: tuple[_Piece, ...], uri: str, limit: int
) -> tuple[dict[str, str | list[str]], int] | None:
    """Match ``pieces`` from the URI's start, not past ``limit``: their values and where they
    end. Each variable is followed by text (the one after it spans segments, and none is
    adjacent to it), and stops at that text's first occurrence."""
    values: dict[str, str | list[str]] = {}
    at = 0
    for index, piece in enumerate(pieces):
        if isinstance(piece, _Text):
            end = at + len(piece.text)
            if end > limit or not uri.startswith(piece.text, at):
                return None
            at = end
            continue
        variable = piece.variable
        following = pieces[index + 1]
        assert isinstance(following, _Text)
        if piece.bare_when_empty:
            if uri.startswith(following.text, at):
                values[variable.name] = ""
                continue
            if at >= limit or uri[at] != "=":
                return None
            at += 1
        stops = _STYLES[variable.operator].stops
        latest = at
        while latest < limit and uri[latest] not in stops:
            latest += 1
        found = uri.find(following.text, at, latest + len(following.text))
        if found == -1:
            return None
        values[variable.name] = unquote(uri[at:found])
        at = found
    return values, at


def _spanning_value(variable: Variable, raw: str) -> str | list[str] | None:
    """The value of the multi-segment variable from the part of the URI it covers."""
    style = _STYLES[variable.operator]
    if not variable.explode:
        return None if any(c in style.stops for c in raw) else unquote(raw)
    if not raw:
        return []
    separator = style.between
    if raw[0] != separator:
        return None
    if any(c in style.stops and c != separator for c in raw):
        return None
    items = []
    for item in raw[1:].split(separator):
        if style.named:
            if item.startswith(variable.name + "="):
                item = item[len(variable.name) + 1 :]
            elif item == variable.name:
                item = ""
            else:
                return None
        items.append(unquote(item))
    return items


def _query_values(query: str) -> dict[str, str]:
    """A query string's parameters, the first of each name; ``+`` is a plus, not a space
    (RFC 3986, not HTML forms), and names are compared as written, never decoded, so that an
    encoded name cannot stand in for a real one."""
    values: dict[str, str] = {}
    for pair in query.split("&") if query else ():
        name, _, value = pair.partition("=")
        if name and name not in values:
            values[name] = unquote(value)
    return values


__all__ = ["InvalidUriTemplate", "Operator", "UriTemplate", "Variable"]
