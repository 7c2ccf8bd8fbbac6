"""What a handler's returned value becomes on the wire: content blocks, a tool's structured
content (its shape decided once from the return annotation), error results, resource contents."""

from __future__ import annotations

import base64
import inspect
import json
from dataclasses import dataclass
from typing import Any, get_args, get_origin

from pydantic import BaseModel, TypeAdapter, create_model
from pydantic_core import to_jsonable_python

from engine._internal.typecache import instance_test
from engine.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

CONTENT_BLOCKS = (TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource)
"""The content block types a handler may return as they are."""
SEQUENCES = (list, tuple)
"""What a handler returns several items in."""
is_content_block = instance_test(*CONTENT_BLOCKS)
is_model = instance_test(BaseModel)
_SCALARS = (str, int, float, bool)


@dataclass(frozen=True, slots=True)
class OutputShape:
    """How a tool's return value becomes structured content, decided from its annotation."""

    schema: dict[str, Any] | None
    wrap: bool
    adapter: TypeAdapter[Any] | None
    scalar: type | None = None
    """``str``, ``int``, ``float`` or ``bool`` when that is the annotation: a value of exactly
    that type is its own JSON, with no serializer call."""


def output_shape(fn_name: str, annotation: Any) -> OutputShape:
    if annotation is inspect.Signature.empty or annotation is None or annotation is Any:
        return OutputShape(None, False, None)
    origin = get_origin(annotation) or annotation
    if isinstance(origin, type) and (
        issubclass(origin, CONTENT_BLOCKS) or is_call_tool_result_type(origin)
    ):
        return OutputShape(None, False, None)
    try:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return OutputShape(annotation.model_json_schema(), False, TypeAdapter(annotation))
        if origin is dict:
            args = get_args(annotation)
            if not args or args[0] is not str:
                return OutputShape(None, False, None)
            value_schema = TypeAdapter(args[1]).json_schema() if args[1] is not Any else True
            schema = {
                "additionalProperties": value_schema,
                "title": f"{fn_name}DictOutput",
                "type": "object",
            }
            return OutputShape(schema, False, TypeAdapter(annotation))
        wrapper = create_model(f"{fn_name}Output", result=(annotation, ...))
        scalar = annotation if annotation in _SCALARS else None
        return OutputShape(wrapper.model_json_schema(), True, TypeAdapter(annotation), scalar)
    except Exception:
        return OutputShape(None, False, None)


_RESULT_FIELDS = frozenset({"content", "structured_content", "is_error"})


def is_call_tool_result_type(kind: type) -> bool:
    """Whether ``kind`` is a ``CallToolResult``: this package's, or a pydantic model of its
    shape (the official ``mcp_types`` one)."""
    if issubclass(kind, CallToolResult):
        return True
    return issubclass(kind, BaseModel) and kind.model_fields.keys() >= _RESULT_FIELDS


def call_tool_result_wire(value: BaseModel) -> dict[str, Any]:
    """The wire ``CallToolResult`` a tool returned as a model (ours, or one of its shape)."""
    if isinstance(value, CallToolResult):
        return value.to_wire()
    wire = value.model_dump(mode="json", by_alias=True, exclude_none=True)
    wire.pop("resultType", None)  # the protocol layer stamps its own
    return wire


def content_blocks(value: Any) -> list[dict[str, Any]]:
    """Wire content blocks for a returned value (strings as text, models as indented JSON)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if is_content_block(value):
        return [value.to_wire()]
    if isinstance(value, SEQUENCES):
        blocks: list[dict[str, Any]] = []
        for item in value:
            blocks.extend(content_blocks(item))
        return blocks
    if is_model(value):
        return [{"type": "text", "text": value.model_dump_json(indent=2, by_alias=True)}]
    text = json.dumps(to_jsonable_python(value), indent=2, ensure_ascii=False)
    return [{"type": "text", "text": text}]


def is_content(value: Any) -> bool:
    """Whether a returned value is content already: a block, or a non-empty sequence of blocks
    only (an empty list is a value like any other: its structured result is ``[]``)."""
    if is_content_block(value):
        return True
    return isinstance(value, SEQUENCES) and bool(value) and all(is_content_block(v) for v in value)


def error_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


@dataclass(frozen=True, slots=True)
class ReadResourceContents:
    """One block of a resource as read from inside the server (``ctx.read_resource``)."""

    content: str | bytes
    mime_type: str | None
    meta: dict[str, Any] | None = None


def resource_contents(uri: str, value: Any, mime_type: str | None) -> list[dict[str, Any]]:
    """Wire ``contents`` for what a resource function returned."""
    items = value if isinstance(value, list) else [value]
    contents: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, TextResourceContents | BlobResourceContents):
            contents.append(item.to_wire())
        elif isinstance(item, ReadResourceContents):
            contents.extend(resource_contents(uri, item.content, item.mime_type))
        elif isinstance(item, bytes):
            blob = base64.b64encode(item).decode("ascii")
            contents.append(
                {"uri": uri, "mimeType": mime_type or "application/octet-stream", "blob": blob}
            )
        elif isinstance(item, str):
            contents.append({"uri": uri, "mimeType": mime_type or "text/plain", "text": item})
        else:
            text = (
                item.model_dump_json(indent=2, by_alias=True)
                if isinstance(item, BaseModel)
                else json.dumps(to_jsonable_python(item), indent=2, ensure_ascii=False)
            )
            contents.append({"uri": uri, "mimeType": mime_type or "application/json", "text": text})
    return contents


def contents_for_server(contents: list[dict[str, Any]]) -> list[ReadResourceContents]:
    """``ctx.read_resource``'s view of wire ``contents``: text as ``str``, blobs decoded."""
    out = []
    for item in contents:
        if "text" in item:
            out.append(ReadResourceContents(item["text"], item.get("mimeType"), item.get("_meta")))
        else:
            raw = base64.b64decode(item.get("blob", ""))
            out.append(ReadResourceContents(raw, item.get("mimeType"), item.get("_meta")))
    return out
