"""``Prompt``: a function listed under ``prompts/list`` and run by ``prompts/get``; what it returns
becomes the prompt's messages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Unpack

import pydantic_core

from engine.content_blocks import as_block, is_model
from engine.handlers.base import Handler, HandlerOptions, description_of
from engine.handlers.content import SEQUENCES
from engine.prompt_messages import Message
from engine.role import Role
from engine.types import GetPromptResult, Icon, PromptMessage

_OPTIONS = HandlerOptions.__optional_keys__


class Prompt(Handler):
    def __init__(
        self, fn: Callable[..., Any], name: str | None = None, **options: Unpack[HandlerOptions]
    ) -> None:
        super().__init__(fn, Role.PROMPT, name, options, _OPTIONS)
        prompt_name, signature = self.name, self.signature
        self.title = options.get("title")
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
    """One message of what a prompt returned: a message as it is; a string, a content block,
    ``Image`` or ``Audio`` as a user message; a dict or a model with ``role`` and ``content``
    as a message; anything else as a user message of its indented JSON."""
    if isinstance(item, PromptMessage):
        return item.to_wire()
    if isinstance(item, str):
        return {"role": "user", "content": {"type": "text", "text": item}}
    block = as_block(item)
    if block is not None:
        return {"role": "user", "content": block.to_wire()}
    if isinstance(item, dict):
        return Message.model_validate(item).to_wire()
    if is_model(item) and {"role", "content"} <= set(type(item).model_fields):
        return Message(item.content, role=item.role).to_wire()
    text = pydantic_core.to_json(item, fallback=str, indent=2).decode()
    return {"role": "user", "content": {"type": "text", "text": text}}
