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
            if len(_FINGERPRINTS) >= _FINGERPRINTS_KEPT:
                _FINGERPRINTS.clear()
            _FINGERPRINTS[key] = known
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


def _fingerprint_key(question: Question) -> tuple[Any, ...] | None:
    """What fully decides a question's params, when that is cheap to say: an exact ``Elicit``
    renders from its message and form model alone (the form's schema is built once per model),
    an exact ``ElicitURL`` from its message and URL. Subclasses may render more, so they are
    fingerprinted every time."""
    if type(question) is Elicit and type(question.message) is str:
        return (Elicit, question.message, question.schema)
    if type(question) is ElicitURL and type(question.message) is str and type(question.url) is str:
        return (ElicitURL, question.message, question.url)
    return None
