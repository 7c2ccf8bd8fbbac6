"""What a content block is: ours (``TextContent``, ``ImageContent``, ...), the ``Image`` and
``Audio`` helpers, or another pydantic model of a block's shape, such as the official SDK's
``mcp_types``. The one place a value becomes a block, for a tool's result, a prompt's messages
and a ``Message`` made by hand.

Another model is taken by its shape, so the engine never imports the official SDK: a block
class has a ``type`` field whose ``Literal`` default names a block type and the fields that block
requires.
"""

from __future__ import annotations

from typing import Any, Literal, get_origin

from pydantic import BaseModel

from engine._internal.typecache import instance_test, remembered
from engine.media import Media
from engine.types import (
    AudioContent,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    WireModel,
)

CONTENT_BLOCKS = (TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource)
"""Our content block types."""
_BLOCK_BY_TYPE: dict[str, type[WireModel]] = {
    "text": TextContent,
    "image": ImageContent,
    "audio": AudioContent,
    "resource_link": ResourceLink,
    "resource": EmbeddedResource,
}

is_our_block = instance_test(*CONTENT_BLOCKS)
is_model = instance_test(BaseModel)


def _block_class_of(cls: type) -> type[WireModel] | None:
    if issubclass(cls, CONTENT_BLOCKS):
        return next(ours for ours in CONTENT_BLOCKS if issubclass(cls, ours))
    if issubclass(cls, BaseModel) and "type" in cls.model_fields:
        tag = cls.model_fields["type"]
        ours = _BLOCK_BY_TYPE.get(tag.default) if isinstance(tag.default, str) else None
        if ours is not None and get_origin(tag.annotation) is Literal:
            required = {name for name, info in ours.model_fields.items() if info.is_required()}
            return ours if required <= set(cls.model_fields) else None
    return None


_block_classes = remembered(_block_class_of)


def block_class(cls: Any) -> type[WireModel] | None:
    """Our block class for a class whose instances are content blocks, else ``None``."""
    return _block_classes(cls) if isinstance(cls, type) else None


def as_block(value: Any) -> WireModel | None:
    """``value`` as one of our content blocks, or ``None`` when it is not content."""
    if is_our_block(value):
        return value  # type: ignore[no-any-return]
    if isinstance(value, Media):
        return value.to_content()
    if is_model(value):
        ours = _block_classes(type(value))
        if ours is not None:
            return ours.of(value)
    return None


__all__ = ["CONTENT_BLOCKS", "as_block", "block_class", "is_model", "is_our_block"]
