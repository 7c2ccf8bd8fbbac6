"""``Redacted``, the public marker of an argument the store must never hold:
``Annotated[str, Redacted()]``.

The handler gets the value as usual; the journal records that the argument was given, not what
it was, so a replay asks for it (``--args``, ``arguments=``) instead of guessing.
"""

from __future__ import annotations


class Redacted:
    """Marks an argument that is never journaled, spilled or logged: ``Annotated[str,
    Redacted()]`` (a password, a one-time code, a personal identifier)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Redacted()"
