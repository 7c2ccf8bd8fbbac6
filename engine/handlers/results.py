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

from engine.content_blocks import as_block
from engine.handlers.content import SEQUENCES
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


def resource_contents(
    uri: str, value: Any, mime_type: str | None, meta: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Wire ``contents`` for what a resource function returned: one text or blob, or several
    when it returned a list of contents (``TextResourceContents``, ``BlobResourceContents``,
    ``ReadResourceContents``). Any other value that is not ``str`` or ``bytes`` (a list of
    strings too) is one JSON text. ``meta`` is each content's ``_meta``."""
    if isinstance(value, list) and value and all(map(_is_contents, value)):
        return [block for item in value for block in resource_contents(uri, item, mime_type, meta)]
    if isinstance(value, TextResourceContents | BlobResourceContents):
        return [value.to_wire()]
    if isinstance(value, ReadResourceContents):
        return resource_contents(uri, value.content, value.mime_type, value.meta)
    content: dict[str, Any] = {"uri": uri}
    if isinstance(value, bytes):
        content["mimeType"] = mime_type or "application/octet-stream"
        content["blob"] = base64.b64encode(value).decode("ascii")
    elif isinstance(value, str):
        content["mimeType"] = mime_type or "text/plain"
        content["text"] = value
    else:
        content["mimeType"] = mime_type or "application/json"
        content["text"] = json_text(value)
    if meta is not None:
        content["_meta"] = meta
    return [content]


def json_text(value: Any) -> str:
    """A value a resource returned that is neither text nor bytes, as indented JSON; what JSON
    cannot hold becomes its ``str()``."""
    if isinstance(value, BaseModel):
        return value.model_dump_json(indent=2, by_alias=True)
    return json.dumps(to_jsonable_python(value, fallback=str), indent=2, ensure_ascii=False)


def _is_contents(value: Any) -> bool:
    return isinstance(value, TextResourceContents | BlobResourceContents | ReadResourceContents)


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
