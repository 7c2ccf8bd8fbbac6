"""``Role``: what a handler is to its clients, a tool, a prompt or a resource.

A module of its own, below both :mod:`engine.di` (which names the role in its error texts) and
:mod:`engine.handlers` (which sets it), so either imports it without importing the other.
"""

from __future__ import annotations

import enum


class Role(enum.StrEnum):
    """A handler's kind. Each value is the word messages and logs use, and equals that string."""

    TOOL = "tool"
    PROMPT = "prompt"
    RESOURCE = "resource"
