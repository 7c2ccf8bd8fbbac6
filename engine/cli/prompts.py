"""Asking a person at the terminal for what a server asks.

Each kind of question says how it is answered at the terminal (``QuestionKind.prompt``: a form,
a URL to open, the model's reply typed in, the working directory as roots) through the
:class:`Console` here. A form is asked field by field, each prompt saying the field's type,
choices, default and whether it is required, and asked again until the answer fits; a form or a
URL can be declined or cancelled. Answers come from the terminal or, for a script, from standard
input.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from engine._internal.inert import inert, inert_lines
from engine.debug.render import describe_field, field_options

_MISSING = object()
"""What :func:`ask_field` returns for a field left out."""
ACTIONS = {"a": "accept", "d": "decline", "c": "cancel"}


class NoMoreInput(Exception):
    """Standard input ended while a question still needed an answer."""


@dataclass
class Console:
    """Where prompts go and answers come from (the terminal, or a script on stdin).

    What it says and asks is made inert: one line each, whatever the server put in it (a
    message that is meant to have lines of its own is said a line at a time).
    """

    stdin: TextIO = field(default_factory=lambda: sys.stdin)
    stdout: TextIO = field(default_factory=lambda: sys.stdout)

    def say(self, text: str = "") -> None:
        print(inert(text), file=self.stdout, flush=True)

    def say_block(self, indent: str, text: str) -> None:
        """A text of several lines, each said indented (a result's text, a server's message)."""
        for line in inert_lines(text) or [""]:
            self.say(indent + line)

    def ask(self, prompt: str) -> str:
        prompt = inert(prompt)
        if self.stdin is sys.stdin and self.stdout is sys.stdout and sys.stdin.isatty():
            try:
                return input(prompt)  # line editing, where the platform has it
            except EOFError:
                self.say()
                raise NoMoreInput from None
        self.stdout.write(prompt)
        self.stdout.flush()
        line = self.stdin.readline()
        if not line:
            self.say()
            raise NoMoreInput
        answer = line.rstrip("\r\n")
        if not self.stdin.isatty():  # a script's answers are shown, as a terminal would echo
            self.say(answer)
        return answer

    def ask_action(self, accepting: str) -> str:
        return ask_action(self, accepting)

    def ask_form(self, schema: Mapping[str, Any]) -> dict[str, Any]:
        required = set(schema.get("required") or [])
        content: dict[str, Any] = {}
        for name, prop in (schema.get("properties") or {}).items():
            value = ask_field(self, name, prop if isinstance(prop, dict) else {}, name in required)
            if value is not _MISSING:
                content[name] = value
        return content


def schema_types(prop: Mapping[str, Any] | None) -> set[str]:
    """The JSON types a schema property allows, ``anyOf`` included."""
    if not prop:
        return set()
    kind = prop.get("type")
    found = {kind} if isinstance(kind, str) else set(kind) if isinstance(kind, list) else set()
    for option in prop.get("anyOf") or []:
        if isinstance(option, dict):
            found |= schema_types(option)
    return found


def ask_action(console: Console, accepting: str) -> str:
    """Accept (the default), decline or cancel; ``accepting`` says what accepting means."""
    prompt = f"  [a]ccept {accepting}, [d]ecline or [c]ancel? [a]: "
    while True:
        reply = console.ask(prompt).strip().lower() or "a"
        for letter, action in ACTIONS.items():
            if reply in (letter, action):
                return action
        console.say(f"  please answer {' or '.join(ACTIONS)}")


def ask_field(console: Console, name: str, prop: Mapping[str, Any], required: bool) -> Any:
    """Prompt for one form field until the answer fits its type; ``_MISSING`` to leave it out."""
    kinds = schema_types(prop)
    options = field_options(prop)
    is_list = "array" in kinds
    console.say("  " + describe_field(name, prop, required))
    if options:
        console.say("    " + "  ".join(f"{n}) {v}" for n, v in enumerate(options, 1)))
    hint = "[y/n]" if "boolean" in kinds else "(comma-separated)" if is_list else ""
    default = prop.get("default", _MISSING)
    if default is None:  # optional: an empty answer leaves the field out
        default = _MISSING
    shown = "" if default is _MISSING else f" [{json.dumps(default, ensure_ascii=False)}]"
    while True:
        text = console.ask(f"  {name}{' ' + hint if hint else ''}{shown}: ").strip()
        if not text:
            if default is not _MISSING:
                return default
            if not required:
                return _MISSING
            console.say("    required: please give a value")
            continue
        try:
            return _field_value(text, kinds, options, is_list)
        except ValueError as exc:
            console.say(f"    {exc}")


def _field_value(text: str, kinds: set[str], options: list[Any], is_list: bool) -> Any:
    if is_list:
        return [_pick(part.strip(), options) for part in text.split(",") if part.strip()]
    if options:
        return _pick(text, options)
    if "boolean" in kinds:
        lowered = text.lower()
        if lowered in ("y", "yes", "true", "1"):
            return True
        if lowered in ("n", "no", "false", "0"):
            return False
        raise ValueError("answer y or n")
    if "integer" in kinds:
        try:
            return int(text)
        except ValueError:
            raise ValueError("a whole number, please") from None
    if "number" in kinds:
        try:
            number = float(text)
        except ValueError:
            raise ValueError("a number, please") from None
        return int(number) if number.is_integer() and "." not in text else number
    return text


def _pick(text: str, options: list[Any]) -> Any:
    if text.isdigit() and 1 <= int(text) <= len(options):
        return options[int(text) - 1]
    for option in options:
        if str(option) == text:
            return option
    raise ValueError(f"choose a number from 1 to {len(options)}, or one of the values")
