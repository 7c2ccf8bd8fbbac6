"""A recorded call for people: its rounds as a timeline, its questions and results in a few lines.

``python -m engine show`` prints :func:`timeline`; the terminal client
(:mod:`engine.cli.terminal_client`) shows questions and results with the same
:func:`describe_field` and :func:`describe_result`, and a replay report
(:mod:`engine.debug.replay`) abbreviates values with :func:`compact`.

Everything here is text from a journal or a server, made inert (:mod:`engine._internal.inert`):
each line the functions return is one line on a terminal, its control and bidi characters
escaped; a result's text keeps its line breaks as lines of its own, indented under its label.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from engine._internal.inert import inert, inert_json, inert_lines
from engine.debug.journal import RecordedCall


def compact(value: Any, limit: int = 400) -> str:
    """``value`` as one line of inert JSON, cut to ``limit`` characters; ``(nothing)`` for
    ``None``."""
    text = "(nothing)" if value is None else inert_json(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def when(ts: float | None) -> str:
    if ts is None:
        return "unknown time"
    moment = datetime.fromtimestamp(ts, UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d} UTC"


def timeline(call: RecordedCall) -> str:
    """A readable account of a call: each round's questions, answers, checkpoints and result,
    every line inert."""
    rounds = call.rounds
    first, last = rounds[0], rounds[-1]
    plural = "s" if len(rounds) != 1 else ""
    lines = [
        f"Call {call.call_id}: {call.method} {call.target}, {len(rounds)} round{plural}, "
        f"{_state_of(last.kind)}",
        f"  started   {when(first.ts)}",
    ]
    if call.principal is not None:
        lines.append(f"  principal {call.principal}")
    arguments = call.arguments
    lines.append(
        "  arguments "
        + (inert_json(arguments) if arguments is not None else f"({call.arguments_missing})")
    )
    redacted = sorted({name for r in rounds for name in r.redacted})
    if redacted:
        lines.append(
            f"  redacted  {', '.join(redacted)} (marked Redacted(): never journaled; replay "
            "needs them given with --args)"
        )
    codes = list(dict.fromkeys(r.code for r in rounds if r.code))
    if codes:
        lines.append(f"  code      {' then '.join(codes)}")
    for recorded in rounds:
        offset = (
            f"+{recorded.ts - first.ts:.3f} s"
            if recorded.ts is not None and first.ts is not None
            else "?"
        )
        took = f"{recorded.duration_ms:.1f} ms" if recorded.duration_ms is not None else "?"
        lines.append("")
        lines.append(
            f"Round {recorded.round}  {offset}  replica {recorded.replica or '?'}  {took}  "
            f"→ {recorded.kind}"
            + (
                f"  ({recorded.protocol}: asked and answered in place)"
                if recorded.answered_in_place
                else ""
            )
        )
        if recorded.truncated:
            parts = ", ".join(f"{name} ({size} bytes)" for name, size in recorded.truncated.items())
            lines.append(
                f"  TRUNCATED {parts} left out of the journal (over journal_max_event_bytes): "
                "this round cannot be replayed exactly"
            )
        for key, answer in recorded.answers.items():
            lines.append(f"  answer  {key}: {compact(answer, 300)}")
        for key, value in recorded.checkpoints.items():
            lines.append(f"  once    {key} = {_checkpoint(value)}")
        verb = "asked" if recorded.answered_in_place else "asks "
        for key, request in recorded.questions.items():
            lines += [f"  {verb}   {key}: " + describe_question(request)[0]]
            lines += ["          " + line for line in describe_question(request)[1:]]
        if recorded.kind == "task":
            lines.append("  task    made: the body runs in the rounds after this one")
        elif recorded.kind == "failed" and isinstance(recorded.result, dict):
            lines.append("  failed  " + compact(recorded.result.get("error"), 300))
        elif recorded.kind not in ("input_required", "cancelled"):
            lines += ["  " + line for line in describe_result(recorded.result)]
    return "\n".join(inert(line) for line in lines)


def _state_of(kind: str) -> str:
    return {
        "input_required": "waiting for an answer (or abandoned)",
        "complete": "complete",
        "error": "ended with an error result",
        "task": "a task, its body not run yet (or lost)",
        "failed": "a task that failed with a JSON-RPC error",
        "cancelled": "a task, cancelled",
    }.get(kind, kind)


def _checkpoint(value: Any) -> str:
    if isinstance(value, list) and len(value) == 2 and value[0] == 1:
        return compact(value[1], 200)
    if isinstance(value, list) and len(value) == 3 and value[0] == 0:
        return f"(asked {value[1]}) " + compact(value[2], 200)
    return compact(value, 200)


def describe_question(request: Any) -> list[str]:
    """A question in a few inert lines: its method, its message, its form fields."""
    return [inert(line) for line in _question_lines(request)]


def _question_lines(request: Any) -> list[str]:
    if not isinstance(request, dict):
        return [compact(request)]
    method = str(request.get("method"))
    params = request.get("params") if isinstance(request.get("params"), dict) else {}
    assert isinstance(params, dict)
    if method == "elicitation/create":
        mode = params.get("mode", "form")
        lines = [f"{method} ({mode}) {params.get('message', '')!r}"]
        if mode == "url":
            lines.append(f"url {params.get('url')}")
        schema = params.get("requestedSchema")
        if isinstance(schema, dict):
            required = set(schema.get("required") or [])
            for name, prop in (schema.get("properties") or {}).items():
                lines.append("field " + describe_field(name, prop, name in required))
        return lines
    if method == "sampling/createMessage":
        lines = [f"{method} (maxTokens {params.get('maxTokens')})"]
        if params.get("systemPrompt"):
            lines.append(f"system: {params['systemPrompt']!r}")
        for message in params.get("messages") or []:
            content = message.get("content") if isinstance(message, dict) else None
            text = content.get("text") if isinstance(content, dict) else None
            role = message.get("role") if isinstance(message, dict) else "?"
            lines.append(f"{role}: {text!r}" if text is not None else f"{role}: {content}")
        return lines
    if not params:
        return [method]
    return [f"{method} {compact(params, 300)}"]


def describe_field(name: str, prop: Any, required: bool) -> str:
    """``name (type, required, default x) — description``, for forms on the terminal: one inert
    line."""
    return inert(_field_text(name, prop, required))


def _field_text(name: str, prop: Any, required: bool) -> str:
    if not isinstance(prop, dict):
        return name
    kind = prop.get("type", "any")
    options = field_options(prop)
    parts = [f"one of {', '.join(map(str, options))}" if options else str(kind)]
    if required:
        parts.append("required")
    elif prop.get("default") is None:
        parts.append("optional")
    else:
        parts.append(f"default {inert_json(prop['default'])}")
    text = f"{name} ({', '.join(parts)})"
    described = str(prop.get("description") or prop.get("title") or "")
    if not described or described.lower().replace(" ", "_") == name.lower():
        return text  # a title pydantic made from the name says nothing new
    return f"{text} — {described}"


def field_options(prop: Mapping[str, Any]) -> list[Any]:
    """The allowed values of an enum field (plain, titled ``oneOf``, or a list of enums)."""
    if isinstance(prop.get("enum"), list):
        return list(prop["enum"])
    for choices in (prop.get("oneOf"), prop.get("anyOf")):
        if isinstance(choices, list) and all(isinstance(c, dict) and "const" in c for c in choices):
            return [c["const"] for c in choices]
    items = prop.get("items")
    if prop.get("type") == "array" and isinstance(items, dict):
        return field_options(items)
    return []


def describe_result(result: Any) -> list[str]:
    """A final result in a few inert lines: its text (a line of the text a line), its
    structured content, whether it failed."""
    if not isinstance(result, dict):
        return [f"result  {compact(result)}"]
    label = "error   " if result.get("isError") else "result  "
    lines: list[str] = []
    for block in result.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "text":
            for line in inert_lines(str(block.get("text", ""))) or [""]:
                lines.append(label + line)
                label = "        "
        else:
            lines.append(label + compact(block, 200))
            label = "        "
    if "structuredContent" in result:
        lines.append("structured " + compact(result["structuredContent"], 300))
    if "messages" in result or "contents" in result:
        rest = {k: v for k, v in result.items() if k not in ("resultType", "_meta")}
        lines.append(label + compact(rest, 400))
    return lines or [label + "(empty)"]


__all__ = [
    "compact",
    "describe_field",
    "describe_question",
    "describe_result",
    "field_options",
    "timeline",
    "when",
]
