"""Registered handlers: tools, prompts, resources and resource templates.

Each wraps a user function analysed once at registration (:mod:`engine.di.signature`) and knows
how to turn what the function returned into the wire result of its method. Everything that can be
computed before a request arrives (schemas, listings, output adapters) is computed here, once.
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import json
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, get_args, get_origin

from pydantic import BaseModel, TypeAdapter, create_model
from pydantic_core import to_jsonable_python

from engine._internal.introspect import callable_name
from engine._internal.typecache import instance_test
from engine.di.signature import Signature, analyze
from engine.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    GetPromptResult,
    Icon,
    ImageContent,
    PromptMessage,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
    WireModel,
)

Overrides = Mapping[Callable[..., Any], Callable[..., Any]]
_BLOCKS = (TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource)
_SEQUENCES = (list, tuple)
_is_block = instance_test(*_BLOCKS)
_is_model = instance_test(BaseModel)
_is_call_tool_result = instance_test(CallToolResult)
_SCALARS = (str, int, float, bool)


def _description(fn: Callable[..., Any], given: str | None) -> str:
    if given is not None:
        return given
    return inspect.cleandoc(fn.__doc__) if fn.__doc__ else ""


def code_digest(fns: list[Callable[..., Any]]) -> str:
    """A fingerprint of the code of some functions: changes when their bytecode does."""
    h = hashlib.sha256()

    def feed(code: types.CodeType) -> None:
        h.update(code.co_qualname.encode() + b"\0" + code.co_code)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                feed(const)
            else:
                h.update(repr(const).encode())

    for fn in fns:
        target = inspect.unwrap(fn)
        code = getattr(target, "__code__", None)
        if code is None:
            code = getattr(type(target).__call__, "__code__", None)
        if isinstance(code, types.CodeType):
            feed(code)
        else:
            h.update(callable_name(fn).encode())
    return h.hexdigest()[:16]


@dataclass(eq=False)
class Handler:
    """A user function plus its registration-time analysis."""

    fn: Callable[..., Any]
    name: str
    role: str
    signature: Signature
    plans: dict[int, Signature] = field(default_factory=dict)

    code_fingerprint: str = field(init=False, repr=False)
    """Changes when the code of the handler or any of its resolvers changes (set when
    registered: every journaled round reads it)."""

    def __post_init__(self) -> None:
        self.code_fingerprint = code_digest(
            [self.fn, *(node.fn for node in self.signature.plan.nodes)]
        )

    def planned(self, overrides: Overrides, version: int) -> Signature:
        """The signature planned with the current dependency overrides (cached per version)."""
        if not overrides:
            return self.signature
        cached = self.plans.get(version)
        if cached is None:
            cached = analyze(
                self.fn,
                self.name,
                role=self.role,
                overrides=overrides,
                model_name=self.signature.arguments.__name__,
            )
            self.plans = {version: cached}
        return cached


# --- tools ------------------------------------------------------------------------------------


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
    if origin is CallToolResult or (isinstance(origin, type) and issubclass(origin, _BLOCKS)):
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


def content_blocks(value: Any) -> list[dict[str, Any]]:
    """Wire content blocks for a returned value (strings as text, models as indented JSON)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if _is_block(value):
        return [value.to_wire()]
    if isinstance(value, _SEQUENCES):
        blocks: list[dict[str, Any]] = []
        for item in value:
            blocks.extend(content_blocks(item))
        return blocks
    if _is_model(value):
        return [{"type": "text", "text": value.model_dump_json(indent=2, by_alias=True)}]
    text = json.dumps(to_jsonable_python(value), indent=2, ensure_ascii=False)
    return [{"type": "text", "text": text}]


class Tool(Handler):
    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        icons: list[Icon] | None = None,
        meta: dict[str, Any] | None = None,
        structured_output: bool | None = None,
        input_schema: dict[str, Any] | None = None,
    ) -> None:
        tool_name = name or callable_name(fn)
        signature = analyze(fn, tool_name, role="tool")
        super().__init__(fn, tool_name, "tool", signature)
        shape = output_shape(tool_name, signature.return_type)
        if structured_output is False:
            shape = OutputShape(None, False, None)
        self.shape = shape
        if input_schema is None:
            input_schema = {"type": "object", **signature.arguments.model_json_schema()}
        self.param_headers: dict[str, str] = {
            arg: prop["x-mcp-header"]
            for arg, prop in input_schema.get("properties", {}).items()
            if isinstance(prop, dict) and isinstance(prop.get("x-mcp-header"), str)
        }
        listing: dict[str, Any] = {
            "name": tool_name,
            "title": title,
            "description": _description(fn, description),
            "inputSchema": input_schema,
            "outputSchema": shape.schema,
            "annotations": annotations.to_wire() if annotations else None,
            "icons": [i.to_wire() for i in icons] if icons else None,
            "_meta": meta,
        }
        self.listing = {k: v for k, v in listing.items() if v is not None}

    def result(self, value: Any) -> dict[str, Any]:
        """The ``CallToolResult`` body for what the tool returned."""
        if type(value) is str:  # the usual return: one text block
            content: list[dict[str, Any]] = [{"type": "text", "text": value}]
            is_content = False
        elif _is_call_tool_result(value):
            return value.to_wire()  # type: ignore[no-any-return]
        else:
            content = content_blocks(value)
            is_content = _is_content(value)
        result: dict[str, Any] = {"content": content}
        shape = self.shape
        if shape.adapter is not None and not is_content:
            if type(value) is shape.scalar:
                structured = value
            else:
                structured = shape.adapter.dump_python(value, mode="json", by_alias=True)
            result["structuredContent"] = {"result": structured} if shape.wrap else structured
        elif _is_model(value):
            result["structuredContent"] = value.model_dump(mode="json", by_alias=True)
        result["isError"] = False
        return result


def _is_content(value: Any) -> bool:
    if _is_block(value):
        return True
    return isinstance(value, _SEQUENCES) and all(_is_block(v) for v in value)


def error_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


# --- prompts ----------------------------------------------------------------------------------


class Prompt(Handler):
    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        icons: list[Icon] | None = None,
    ) -> None:
        prompt_name = name or callable_name(fn)
        signature = analyze(fn, prompt_name, role="prompt")
        super().__init__(fn, prompt_name, "prompt", signature)
        self.description = _description(fn, description)
        arguments = []
        for arg_name, info in signature.arguments.model_fields.items():
            entry: dict[str, Any] = {"name": arg_name, "required": info.is_required()}
            if info.description:
                entry["description"] = info.description
            arguments.append(entry)
        listing: dict[str, Any] = {
            "name": prompt_name,
            "title": title,
            "description": self.description,
            "arguments": arguments,
            "icons": [i.to_wire() for i in icons] if icons else None,
        }
        self.listing = {k: v for k, v in listing.items() if v is not None}

    def result(self, value: Any) -> dict[str, Any]:
        if isinstance(value, GetPromptResult):
            return value.to_wire()
        items = value if isinstance(value, _SEQUENCES) else [value]
        messages = [_prompt_message(item) for item in items]
        return {"description": self.description, "messages": messages}


def _prompt_message(item: Any) -> dict[str, Any]:
    if isinstance(item, PromptMessage):
        return item.to_wire()
    if isinstance(item, str):
        return {"role": "user", "content": {"type": "text", "text": item}}
    if isinstance(item, _BLOCKS):
        return {"role": "user", "content": item.to_wire()}
    if isinstance(item, dict):
        return PromptMessage.model_validate(item).to_wire()
    raise TypeError(
        f"A prompt returned {type(item).__name__}; return a string, a PromptMessage, a content "
        "block, or a list of those"
    )


# --- resources --------------------------------------------------------------------------------


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
    out = []
    for item in contents:
        if "text" in item:
            out.append(ReadResourceContents(item["text"], item.get("mimeType"), item.get("_meta")))
        else:
            raw = base64.b64decode(item.get("blob", ""))
            out.append(ReadResourceContents(raw, item.get("mimeType"), item.get("_meta")))
    return out


class Resource(Handler):
    """A resource at a fixed URI, or a template whose ``{name}`` parts become arguments."""

    def __init__(
        self,
        fn: Callable[..., Any],
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        icons: list[Icon] | None = None,
    ) -> None:
        resource_name = name or callable_name(fn)
        signature = analyze(fn, resource_name, role="resource")
        super().__init__(fn, resource_name, "resource", signature)
        self.uri = uri
        self.mime_type = mime_type
        self.params = re.findall(r"{(\w+)}", uri)
        self.is_template = bool(self.params)
        missing = set(self.params) ^ set(signature.argument_names)
        if self.is_template and missing:
            from engine.errors import InvalidSignature

            raise InvalidSignature(
                f"Resource template {uri!r} and function {resource_name!r} must name the same "
                f"parameters; mismatched: {sorted(missing)}"
            )
        self.pattern = re.compile(
            "^" + re.sub(r"\\{(\w+)\\}", r"(?P<\1>[^/]+)", re.escape(uri)) + "$"
        )
        if not self.is_template and signature.argument_names:
            from engine.errors import InvalidSignature

            raise InvalidSignature(
                f"Resource {uri!r} has parameters {signature.argument_names} but its URI has no "
                "{placeholders}; make it a template like 'scheme://{name}'"
            )
        listing: dict[str, Any] = {
            "name": resource_name,
            "title": title,
            ("uriTemplate" if self.is_template else "uri"): uri,
            "description": _description(fn, description),
            "mimeType": mime_type or _default_mime(signature.return_type),
            "icons": [i.to_wire() for i in icons] if icons else None,
        }
        self.listing = {k: v for k, v in listing.items() if v is not None}

    def match(self, uri: str) -> dict[str, str] | None:
        found = self.pattern.match(uri)
        return found.groupdict() if found else None


def _default_mime(annotation: Any) -> str | None:
    if annotation is str:
        return "text/plain"
    if annotation is bytes:
        return "application/octet-stream"
    return None


__all__ = [
    "Handler",
    "Prompt",
    "ReadResourceContents",
    "Resource",
    "Tool",
    "WireModel",
    "content_blocks",
    "error_result",
]
