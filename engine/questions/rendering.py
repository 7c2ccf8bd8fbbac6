"""A question rendered for the wire, and the fingerprint that pins a recorded answer to it.

Rendering is deterministic (fixed key order), so the same code renders the same bytes on every
replica: a reworded question has another fingerprint, and is asked again.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_json

from engine.questions.kinds import Elicit, ElicitURL, Question


def fingerprint(params: dict[str, Any]) -> bytes:
    """8 bytes of SHA-256 over the JSON of a rendered question.

    Rendering is deterministic (fixed key order), so the same code renders the same bytes on
    every replica; no sorting is needed.
    """
    return hashlib.sha256(to_json(params)).digest()[:8]


@dataclass(slots=True)
class Rendered:
    """A question ready for the wire, with its fingerprint (never changed once built)."""

    question: Question
    params: dict[str, Any]
    fingerprint: bytes
    from_body: bool = False
    """Asked from a body, which receives any outcome (a resolver re-asks an accepted URL)."""

    @classmethod
    def of(cls, question: Question, *, from_body: bool = False) -> Rendered:
        params = question.render()
        key = _fingerprint_key(question)
        if key is None:
            return cls(question, params, fingerprint(params), from_body)
        known = _FINGERPRINTS.get(key)
        if known is None:
            known = fingerprint(params)
            _remember(key, known)
        return cls(question, params, known, from_body)

    def settles(self, outcome: Any) -> bool:
        return self.from_body or self.question.settles(outcome)

    def request(self) -> dict[str, Any]:
        if self.params:
            return {"method": self.question.method, "params": self.params}
        return {"method": self.question.method}


_FINGERPRINTS: dict[tuple[Any, ...], bytes] = {}
"""Fingerprints of the forms and links resolvers ask over and over (each round asks again)."""
_FINGERPRINTS_KEPT = 4096
FINGERPRINT_TEXT_MAX = 1024
"""Texts (a message, a URL) longer than this are fingerprinted every time, never cached: the
cache is for the small questions resolvers repeat, and must not hold large values."""
FINGERPRINTS_CHARS_KEPT = 1024 * 1024
"""The cache's total text (messages and URLs), at most: past it, it starts over."""
_fingerprint_chars = 0


def _remember(key: tuple[Any, ...], known: bytes) -> None:
    global _fingerprint_chars
    if len(_FINGERPRINTS) >= _FINGERPRINTS_KEPT or _fingerprint_chars >= FINGERPRINTS_CHARS_KEPT:
        _FINGERPRINTS.clear()
        _fingerprint_chars = 0
    _FINGERPRINTS[key] = known
    _fingerprint_chars += _key_chars(key)


def _key_chars(key: tuple[Any, ...]) -> int:
    return sum(len(part) for part in key[1:] if isinstance(part, str))


def cached_chars() -> int:
    """The total text the fingerprint cache holds (for tests and diagnostics)."""
    return sum(_key_chars(key) for key in _FINGERPRINTS)


def _fingerprint_key(question: Question) -> tuple[Any, ...] | None:
    """What fully decides a question's params, when that is cheap to say: an exact ``Elicit``
    renders from its message and form model alone (the form's schema is built once per model),
    an exact ``ElicitURL`` without an elicitation id from its message and URL. Subclasses may
    render more, so they are fingerprinted every time, and so are questions whose texts exceed
    ``FINGERPRINT_TEXT_MAX``."""
    if type(question) is Elicit:
        message = question.message
        if type(message) is str and len(message) <= FINGERPRINT_TEXT_MAX:
            return (Elicit, message, question.schema)
        return None
    if type(question) is ElicitURL and question.elicitation_id is None:
        message, url = question.message, question.url
        if (
            type(message) is str
            and type(url) is str
            and len(message) <= FINGERPRINT_TEXT_MAX
            and len(url) <= FINGERPRINT_TEXT_MAX
        ):
            return (ElicitURL, message, url)
    return None
