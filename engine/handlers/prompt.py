"""``Prompt``: a function listed under ``prompts/list`` and run by ``prompts/get``; what it returns
becomes the prompt's messages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Unpack

from engine.handlers.base import Handler, HandlerOptions, description_of
from engine.handlers.content import CONTENT_BLOCKS, SEQUENCES
from engine.role import Role
from engine.types import GetPromptResult, Icon, PromptMessage

_OPTIONS = HandlerOptions.__optional_keys__


class Prompt(Handler):
    def __init__(
        self, fn: Callable[..., Any], name: str | None = None, **options: Unpack[HandlerOptions]
    ) -> None:
        super().__init__(fn, Role.PROMPT, name, options, _OPTIONS)
        prompt_name, signature = self.name, self.signature
        self.description = description_of(fn, options.get("description"))
        arguments = []
        for arg_name, info in signature.arguments.model_fields.items():
            entry: dict[str, Any] = {"name": arg_name, "required": info.is_required()}
            if info.description:
                entry["description"] = info.description
            arguments.append(entry)
        icons = options.get("icons")
        listing: dict[str, Any] = {
            "name": prompt_name,
            "title": options.get("title"),
            "description": self.description,
            "arguments": arguments,
            "icons": [Icon.of(i).to_wire() for i in icons] if icons else None,
        }
        self.listing = {k: v for k, v in listing.items() if v is not None}

    def result(self, value: Any) -> dict[str, Any]:
        if isinstance(value, GetPromptResult):
            return value.to_wire()
        items = value if isinstance(value, SEQUENCES) else [value]
        messages = [_prompt_message(item) for item in items]
        return {"description": self.description, "messages": messages}


def _prompt_message(item: Any) -> dict[str, Any]:
    if isinstance(item, PromptMessage):
        return item.to_wire()
    if isinstance(item, str):
        return {"role": "user", "content": {"type": "text", "text": item}}
    if isinstance(item, CONTENT_BLOCKS):
        return {"role": "user", "content": item.to_wire()}
    if isinstance(item, dict):
        return PromptMessage.model_validate(item).to_wire()
    raise TypeError(
        f"A prompt returned {type(item).__name__}; return a string, a PromptMessage, a content "
        "block, or a list of those"
    )
