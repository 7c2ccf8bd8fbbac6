"""Named sentinels."""

from __future__ import annotations


class Marker:
    """A named sentinel: compared with ``is``, shown by its name."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name
