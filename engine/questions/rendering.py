"""A question rendered for the wire, and the fingerprint that pins a recorded answer to it.

Rendering is deterministic (fixed key order), so the same code renders the same bytes on every
replica: a reworded question has another fingerprint, and is asked again. Only a question of a
registered kind renders (``engine/questions/kinds.py``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_json

from engine.questions.kinds import kind_of
from engine.questions.question import FINGERPRINT_TEXT_MAX, Question, QuestionKind


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
    kind: QuestionKind
    params: dict[str, Any]
    fingerprint: bytes
    from_body: bool = False
    """Asked from a body, which receives any outcome (a resolver re-asks an accepted URL)."""

    @classmethod
    def of(cls, question: Question, *, from_body: bool = False) -> Rendered:
        """``question`` rendered; :class:`~engine.questions.kinds.UnknownQuestionKind` when its
        kind is not registered."""
        kind = kind_of(question)
        params = question.render()
        key = question.fingerprint_key()
        if key is None:
            return cls(question, kind, params, fingerprint(params), from_body)
        known = _FINGERPRINTS.get(key)
        if known is None:
            known = fingerprint(params)
            _remember(key, known)
        return cls(question, kind, params, known, from_body)

    def settles(self, outcome: Any) -> bool:
        return self.from_body or self.question.settles(outcome)

    def request(self) -> dict[str, Any]:
        if self.params:
            return {"method": self.question.method, "params": self.params}
        return {"method": self.question.method}


_FINGERPRINTS: dict[tuple[Any, ...], bytes] = {}
"""Fingerprints of the forms and links resolvers ask over and over (each round asks again)."""
_FINGERPRINTS_KEPT = 4096
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


__all__ = ["FINGERPRINT_TEXT_MAX", "Rendered", "cached_chars", "fingerprint"]
