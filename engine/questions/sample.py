"""Sampling (``sampling/createMessage``): a completion asked of the client's model."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel

from engine.questions.question import (
    Outcome,
    Question,
    QuestionKind,
    Terminal,
    wire_outcome,
)
from engine.types import (
    CreateMessageResult,
    CreateMessageResultWithTools,
    ModelPreferences,
    SamplingMessage,
    Tool,
    ToolChoice,
)


class Sample(Question):
    """Ask the client's model for a completion (``sampling/createMessage``)."""

    method = "sampling/createMessage"
    kind = "sample"

    def __init__(
        self,
        messages: Sequence[SamplingMessage],
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        include_context: Literal["none", "thisServer", "allServers"] | None = None,
        temperature: float | None = None,
        stop_sequences: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        model_preferences: ModelPreferences | None = None,
        tools: list[Tool] | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> None:
        self.messages = [SamplingMessage.of(m) for m in messages]
        self.max_tokens = max_tokens
        self.system_prompt = system_prompt
        self.include_context = include_context
        self.temperature = temperature
        self.stop_sequences = stop_sequences
        self.metadata = metadata
        self.model_preferences = (
            None if model_preferences is None else ModelPreferences.of(model_preferences)
        )
        self.tools = None if tools is None else [Tool.of(t) for t in tools]
        self.tool_choice = None if tool_choice is None else ToolChoice.of(tool_choice)

    @property
    def uses_tools(self) -> bool:
        return self.tools is not None or self.tool_choice is not None

    def render(self) -> dict[str, Any]:
        params: dict[str, Any] = {
            "messages": [m.to_wire() for m in self.messages],
            "maxTokens": self.max_tokens,
        }
        optional: dict[str, Any] = {
            "systemPrompt": self.system_prompt,
            "includeContext": self.include_context,
            "temperature": self.temperature,
            "stopSequences": self.stop_sequences,
            "metadata": self.metadata,
            "modelPreferences": self.model_preferences.to_wire()
            if self.model_preferences
            else None,
            "tools": [t.to_wire() for t in self.tools] if self.tools is not None else None,
            "toolChoice": self.tool_choice.to_wire() if self.tool_choice else None,
        }
        params.update((k, v) for k, v in optional.items() if v is not None)
        return params

    def missing_capability(self, capabilities: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        sampling = capabilities.get("sampling")
        if not isinstance(sampling, dict):
            return "sampling", {"sampling": {}}
        if self.uses_tools and not isinstance(sampling.get("tools"), dict):
            return "sampling.tools", {"sampling": {"tools": {}}}
        return None

    def parse(self, answer: Any) -> Outcome:
        model = CreateMessageResultWithTools if self.uses_tools else CreateMessageResult
        return wire_outcome(model, answer, "a sampling result")

    def kept(self, outcome: Outcome) -> Any:
        return outcome.to_wire()


def _restore(params: Mapping[str, Any], form_model: type[BaseModel] | None) -> Question:
    question = Sample([], max_tokens=0)
    if "tools" in params or "toolChoice" in params:
        question.tools = []  # answers parse as they did for the question that offered tools
    return question


def _ask_model_at_terminal(terminal: Terminal, params: Mapping[str, Any]) -> dict[str, Any]:
    """The person at the terminal plays the model: shown the messages, they type its reply."""
    terminal.say("  The server asks the model. You are the model:")
    if params.get("systemPrompt"):
        terminal.say_block("    system: ", str(params["systemPrompt"]))
    for message in params.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        blocks = content if isinstance(content, list) else [content]
        for block in blocks:
            text = block.get("text") if isinstance(block, dict) else None
            shown = text if isinstance(text, str) else json.dumps(block)
            terminal.say_block(f"    {message.get('role', '?')}: ", shown)
    terminal.say(f"    (at most {params.get('maxTokens')} tokens)")
    reply = terminal.ask("  Type the model's reply: ")
    return {
        "role": "assistant",
        "content": {"type": "text", "text": reply},
        "model": "typed-by-hand",
        "stopReason": "endTurn",
    }


SAMPLE = QuestionKind(
    kind=Sample.kind,
    question=Sample,
    capability={"sampling": {"tools": {}}},
    session_keeps={"sampling": ("tools", "context")},
    trace_label="sample",
    restore=_restore,
    prompt=_ask_model_at_terminal,
    callback="sampling",
)

__all__ = ["SAMPLE", "Sample"]
