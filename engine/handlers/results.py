"""What a handler's returned value becomes on the wire: content blocks, error results, resource
contents (a tool's structured content is :mod:`engine.handlers.output`)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import pydantic_core
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from engine.handlers.content import SEQUENCES, as_block
from engine.types import BlobResourceContents, TextResourceContents


def content_blocks(value: Any) -> list[dict[str, Any]]:
    """Wire content blocks for a returned value: strings as text, content blocks (ours or of
    their shape) and ``Image`` / ``Audio`` as they are, the items of a list or tuple one after
    another, anything else as indented JSON (``str()`` of what has no JSON form)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    block = as_block(value)
    if block is not None:
        return [block.to_wire()]
    if isinstance(value, SEQUENCES):
        blocks: list[dict[str, Any]] = []
        for item in value:
            blocks.extend(content_blocks(item))
        return blocks
    text = pydantic_core.to_json(value, fallback=str, indent=2).decode()
    return [{"type": "text", "text": text}]


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
