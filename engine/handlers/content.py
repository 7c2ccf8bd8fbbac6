"""What counts as content a handler returns: content blocks (``engine/content_blocks.py``), the
``Image`` and ``Audio`` helpers, and a ``CallToolResult``; for values, and for return
annotations.

Another model is taken by its shape, so the engine never imports the official SDK: a result
class has ``content``, ``structured_content`` and ``is_error``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel

from engine._internal.introspect import is_union
from engine._internal.typecache import instance_test, remembered
from engine.content_blocks import block_class, is_model
from engine.media import Media
from engine.types import CallToolResult

SEQUENCES = (list, tuple)
"""What a handler returns several items in."""
_RESULT_FIELDS = frozenset({"content", "structured_content", "is_error"})
_CONTENT_SEQUENCE_ORIGINS = (list, tuple, Sequence)

is_our_call_tool_result = instance_test(CallToolResult)


def _is_result_class_of(cls: type) -> bool:
    return issubclass(cls, CallToolResult) or (
        issubclass(cls, BaseModel) and set(cls.model_fields) >= _RESULT_FIELDS
    )


_result_classes = remembered(_is_result_class_of)


def is_result_class(cls: Any) -> bool:
    """Whether ``cls`` is a ``CallToolResult``: ours, or a model of its shape."""
    return isinstance(cls, type) and _result_classes(cls)


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
    if is_union(annotation) or origin in _CONTENT_SEQUENCE_ORIGINS:
        return any(returns_content(arg) for arg in get_args(annotation))
    return False


__all__ = ["SEQUENCES", "as_call_tool_result", "is_result_class", "returns_content"]
