"""Roots (``roots/list``): the directories and files the client lets the server see."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from engine.questions.question import (
    Outcome,
    Question,
    QuestionKind,
    Terminal,
    wire_outcome,
)
from engine.types import ListRootsResult


class ListRoots(Question):
    """Ask the client for its current roots (``roots/list``)."""

    method = "roots/list"
    kind = "roots"

    def render(self) -> dict[str, Any]:
        return {}

    def missing_capability(self, capabilities: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        if isinstance(capabilities.get("roots"), dict):
            return None
        return "roots", {"roots": {}}

    def parse(self, answer: Any) -> Outcome:
        return wire_outcome(ListRootsResult, answer, "a roots list")

    def kept(self, outcome: Outcome) -> Any:
        return outcome.to_wire()


def _restore(params: Mapping[str, Any], form_model: type[BaseModel] | None) -> Question:
    return ListRoots()


def _working_directory(terminal: Terminal, params: Mapping[str, Any]) -> dict[str, Any]:
    """The terminal client's root is the directory it runs in."""
    cwd = Path.cwd()
    terminal.say(f"  roots: {cwd.as_uri()} (the working directory)")
    return {"roots": [{"uri": cwd.as_uri(), "name": cwd.name or str(cwd)}]}


ROOTS = QuestionKind(
    kind=ListRoots.kind,
    question=ListRoots,
    capability={"roots": {}},
    session_keeps={"roots": ("listChanged",)},
    trace_label="roots",
    restore=_restore,
    prompt=_working_directory,
    callback="roots",
)

__all__ = ["ROOTS", "ListRoots"]
