"""Keyword options declared once, as a ``TypedDict`` that a callee takes as ``**options``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def refuse_unknown(
    where: str,
    options: Mapping[str, Any],
    known: frozenset[str],
    advice: Mapping[str, str] | None = None,
) -> None:
    """Raise the ``TypeError`` Python raises for a keyword argument ``where`` does not take:
    ``**options`` accepts any name at run time, the ``TypedDict`` only tells the type checker.
    A name in ``advice`` (one another SDK takes, say) is refused with what to do instead."""
    for key in options:
        if key not in known:
            if advice and key in advice:
                raise TypeError(f"{where}() does not take {key!r}: {advice[key]}")
            raise TypeError(f"{where}() got an unexpected keyword argument {key!r}")
