"""Asking a person at the terminal for what a server asks: form fields, a model's reply, roots.

A form is asked field by field, each prompt saying the field's type, choices, default and
whether it is required, and asked again until the answer fits; a form or a URL can be declined
or cancelled. Sampling asks for the model's reply to be typed in; roots are the working
directory. Answers come from the terminal or, for a script, from standard input.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
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


def answer_elicitation(console: Console, params: Mapping[str, Any]) -> dict[str, Any]:
    mode = params.get("mode", "form")
    console.say_block("  ", str(params.get("message", "")))
    if mode == "url":
        console.say(f"  Open this URL in a browser: {params.get('url')}")
        return {"action": ask_action(console, "(you opened it)")}
    action = ask_action(console, "and fill in the form")
    if action != "accept":
        return {"action": action}
    schema = params.get("requestedSchema") or {}
    required = set(schema.get("required") or [])
    content: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        value = ask_field(console, name, prop if isinstance(prop, dict) else {}, name in required)
        if value is not _MISSING:
            content[name] = value
    return {"action": "accept", "content": content}


def answer_sampling(console: Console, params: Mapping[str, Any]) -> dict[str, Any]:
    console.say("  The server asks the model. You are the model:")
    if params.get("systemPrompt"):
        console.say_block("    system: ", str(params["systemPrompt"]))
    for message in params.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        blocks = content if isinstance(content, list) else [content]
        for block in blocks:
            text = block.get("text") if isinstance(block, dict) else None
            shown = text if isinstance(text, str) else json.dumps(block)
            console.say_block(f"    {message.get('role', '?')}: ", shown)
    console.say(f"    (at most {params.get('maxTokens')} tokens)")
    reply = console.ask("  Type the model's reply: ")
    return {
        "role": "assistant",
        "content": {"type": "text", "text": reply},
        "model": "typed-by-hand",
        "stopReason": "endTurn",
    }


def answer_roots(console: Console, params: Mapping[str, Any]) -> dict[str, Any]:
    cwd = Path.cwd()
    console.say(f"  roots: {cwd.as_uri()} (the working directory)")
    return {"roots": [{"uri": cwd.as_uri(), "name": cwd.name or str(cwd)}]}


ANSWERERS: dict[str, Callable[[Console, Mapping[str, Any]], dict[str, Any]]] = {
    "elicitation/create": answer_elicitation,
    "sampling/createMessage": answer_sampling,
    "roots/list": answer_roots,
}
