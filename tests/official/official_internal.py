"""Placeholders for the official names ``engine`` does not export (see rewrite.py)."""

from __future__ import annotations

from typing import Any, NoReturn


class OfficialInternal(Exception):
    """A test used an official name this project does not provide."""


class unbound:
    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def _fail(self, *_: Any, **__: Any) -> NoReturn:
        raise OfficialInternal(f"{self._name} is official, and engine does not provide it")

    __call__ = _fail
    __getattr__ = _fail
    __getitem__ = _fail
    __iter__ = _fail

    def __repr__(self) -> str:
        return f"<official {self._name}>"
