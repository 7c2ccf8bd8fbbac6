"""``Message``, ``UserMessage`` and ``AssistantMessage``: the turns a prompt returns.

A message's content is one content block; what a prompt author has at hand is taken and turned
into one: a string becomes text, an ``Image`` or ``Audio`` its block, a block of the official
SDK's ``mcp_types`` (or a dict of a block's wire form) ours. Each is a
:class:`~engine.types.PromptMessage`, so it goes on the wire as it is.
"""

from __future__ import annotations

from typing import Any

from engine.content_blocks import as_block
from engine.types import PromptMessage, Role, TextContent


def message_content(content: Any) -> Any:
    """``content`` as a content block (:func:`~engine.content_blocks.as_block`), else as it is,
    for the block union to validate (a dict of a block's wire form) or refuse."""
    if isinstance(content, str):
        return TextContent(text=content)
    block = as_block(content)
    return content if block is None else block


class Message(PromptMessage):
    """One turn of a prompt, from either role: ``Message("Hello", role="user")``."""

    def __init__(self, content: Any = None, **data: Any) -> None:
        super().__init__(content=message_content(content), **data)


class UserMessage(Message):
    """A turn of the user's: ``UserMessage("Review this code")``."""

    role: Role = "user"


class AssistantMessage(Message):
    """A turn of the assistant's, to seed a conversation."""

    role: Role = "assistant"


__all__ = ["AssistantMessage", "Message", "UserMessage"]
