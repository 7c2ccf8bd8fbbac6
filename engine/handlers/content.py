"""What counts as content a handler returns: content blocks (ours, or another pydantic model of a
block's shape, such as the official SDK's ``mcp_types``), the ``Image`` and ``Audio`` helpers,
and a ``CallToolResult``; for values, and for return annotations.

Another model is taken by its shape, so the engine never imports the official SDK: a block
class has a ``type`` field whose ``Literal`` default names a block type and the fields that block
requires; a result class has ``content``, ``structured_content`` and ``is_error``.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from engine._internal.typecache import instance_test
from engine.media import Media
from engine.types import (
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    WireModel,
)

CONTENT_BLOCKS = (TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource)
"""Our content block types."""
SEQUENCES = (list, tuple)
"""What a handler returns several items in."""
_BLOCK_BY_TYPE: dict[str, type[WireModel]] = {
    "text": TextContent,
    "image": ImageContent,
    "audio": AudioContent,
    "resource_link": ResourceLink,
    "resource": EmbeddedResource,
}
_RESULT_FIELDS = frozenset({"content", "structured_content", "is_error"})
_CONTENT_SEQUENCE_ORIGINS = (list, tuple, Sequence)

is_our_block = instance_test(*CONTENT_BLOCKS)
is_model = instance_test(BaseModel)
is_our_call_tool_result = instance_test(CallToolResult)

_block_classes: dict[type, type[WireModel] | None] = {}
_result_classes: dict[type, bool] = {}


def block_class(cls: Any) -> type[WireModel] | None:
    """Our block class for a class whose instances are content blocks, else ``None``."""
    if not isinstance(cls, type):
        return None
    if cls in _block_classes:
        return _block_classes[cls]
    found: type[WireModel] | None = None
    if issubclass(cls, CONTENT_BLOCKS):
        found = next(ours for ours in CONTENT_BLOCKS if issubclass(cls, ours))
    elif issubclass(cls, BaseModel) and "type" in cls.model_fields:
        tag = cls.model_fields["type"]
        ours = _BLOCK_BY_TYPE.get(tag.default) if isinstance(tag.default, str) else None
        if ours is not None and get_origin(tag.annotation) is Literal:
            required = {name for name, info in ours.model_fields.items() if info.is_required()}
            found = ours if required <= set(cls.model_fields) else None
    _block_classes[cls] = found
    return found


def is_result_class(cls: Any) -> bool:
    """Whether ``cls`` is a ``CallToolResult``: ours, or a model of its shape."""
    if not isinstance(cls, type):
        return False
    known = _result_classes.get(cls)
    if known is None:
        known = issubclass(cls, CallToolResult) or (
            issubclass(cls, BaseModel) and set(cls.model_fields) >= _RESULT_FIELDS
        )
        _result_classes[cls] = known
    return known


def as_block(value: Any) -> WireModel | None:
    """``value`` as one of our content blocks, or ``None`` when it is not content."""
    if is_our_block(value):
        return value  # type: ignore[no-any-return]
    if isinstance(value, Media):
        return value.to_content()
    if is_model(value):
        ours = block_class(type(value))
        if ours is not None:
            return ours.of(value)
    return None


def as_call_tool_result(value: Any) -> CallToolResult | None:
    """``value`` as our ``CallToolResult`` when it is one (of ours, or of its shape)."""
    if is_our_call_tool_result(value):
        return value  # type: ignore[no-any-return]
    if is_model(value) and is_result_class(type(value)):
        result = CallToolResult.of(value)
        # The protocol layer stamps a 2026-07-28 result's resultType; a 2025-11-25 one has none.
        (result.model_extra or {}).pop("resultType", None)
        return result
    return None


def returns_content(annotation: Any) -> bool:
    """Whether a return annotation declares content: a block class, ``Image`` or ``Audio``, bare,
    as the items of a list, tuple or sequence, or as an arm of a union. Such a tool's result is
    its blocks, with no output schema (unless ``structured_output=True`` asks for one)."""
    origin = get_origin(annotation)
    if origin is None:
        return isinstance(annotation, type) and (
            issubclass(annotation, Media) or block_class(annotation) is not None
        )
    if origin is Annotated:
        return returns_content(get_args(annotation)[0])
    if _is_union(origin) or origin in _CONTENT_SEQUENCE_ORIGINS:
        return any(returns_content(arg) for arg in get_args(annotation))
    return False


def _is_union(origin: Any) -> bool:
    return origin is Union or origin is types.UnionType


__all__ = [
    "CONTENT_BLOCKS",
    "SEQUENCES",
    "as_block",
    "as_call_tool_result",
    "block_class",
    "is_model",
    "is_result_class",
    "returns_content",
]
