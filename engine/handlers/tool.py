"""``Tool``: a function listed under ``tools/list`` and run by ``tools/call``; its input and output
schemas are fixed at registration, and :meth:`Tool.result` builds each ``CallToolResult``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Unpack

from engine._internal.typecache import REMEMBERED_TYPES
from engine.handlers.base import Handler, HandlerOptions, description_of
from engine.handlers.results import (
    OutputShape,
    call_tool_result_wire,
    content_blocks,
    is_call_tool_result_type,
    is_content,
    is_model,
    output_shape,
)
from engine.role import Role
from engine.tasks.policy import TaskOption, TaskPolicy
from engine.types import Icon, ToolAnnotations


class ToolOptions(HandlerOptions, total=False):
    """What a tool may be given besides what every handler may (``@mcp.tool(...)``)."""

    annotations: ToolAnnotations | Mapping[str, Any] | None
    """A `ToolAnnotations`, a dict of its fields, or any model of that shape."""
    meta: dict[str, Any] | None
    """Listed as the tool's ``_meta``."""
    structured_output: bool | None
    """``False``: no output schema and no structured content, whatever the return annotation."""
    input_schema: dict[str, Any] | None
    """Replaces the listed schema; the arguments are still validated against the parameters."""
    task: TaskOption
    """Run the body as a task (docs/tasks.md): ``True`` when the client takes tasks,
    ``"required"`` always, or a function of the arguments deciding call by call."""


_OPTIONS = ToolOptions.__optional_keys__
_RESULT_TYPES: dict[type, bool] = {}
"""Whether each type a tool returned is a ``CallToolResult`` (ours or of its shape), by type."""


def _is_call_tool_result(value: Any) -> bool:
    kind = type(value)
    known = _RESULT_TYPES.get(kind)
    if known is None:
        known = is_call_tool_result_type(kind)
        if len(_RESULT_TYPES) >= REMEMBERED_TYPES:
            _RESULT_TYPES.clear()
        _RESULT_TYPES[kind] = known
    return known


class Tool(Handler):
    def __init__(
        self, fn: Callable[..., Any], name: str | None = None, **options: Unpack[ToolOptions]
    ) -> None:
        super().__init__(fn, Role.TOOL, name, options, _OPTIONS)
        tool_name, signature = self.name, self.signature
        shape = output_shape(tool_name, signature.return_type)
        if options.get("structured_output") is False:
            shape = OutputShape(None, False, None)
        self.shape = shape
        input_schema = options.get("input_schema")
        if input_schema is None:
            input_schema = {"type": "object", **signature.arguments.model_json_schema()}
        self.param_headers: dict[str, str] = {
            arg: prop["x-mcp-header"]
            for arg, prop in input_schema.get("properties", {}).items()
            if isinstance(prop, dict) and isinstance(prop.get("x-mcp-header"), str)
        }
        annotations, icons = options.get("annotations"), options.get("icons")
        listing: dict[str, Any] = {
            "name": tool_name,
            "title": options.get("title"),
            "description": description_of(fn, options.get("description")),
            "inputSchema": input_schema,
            "outputSchema": shape.schema,
            "annotations": ToolAnnotations.of(annotations).to_wire() if annotations else None,
            "icons": [Icon.of(i).to_wire() for i in icons] if icons else None,
            "_meta": options.get("meta"),
        }
        self.listing = {k: v for k, v in listing.items() if v is not None}
        self.task = TaskPolicy.of(
            options.get("task"), tool_name, frozenset(signature.argument_names)
        )
        """``None`` for a tool that never runs as a task."""

    def result(self, value: Any) -> dict[str, Any]:
        """The ``CallToolResult`` body for what the tool returned."""
        if type(value) is str:  # the usual return: one text block
            content: list[dict[str, Any]] = [{"type": "text", "text": value}]
            value_is_content = False
        elif _is_call_tool_result(value):
            return call_tool_result_wire(value)
        else:
            content = content_blocks(value)
            value_is_content = is_content(value)
        result: dict[str, Any] = {"content": content}
        shape = self.shape
        if shape.adapter is not None and not value_is_content:
            if type(value) is shape.scalar:
                structured = value
            else:
                structured = shape.adapter.dump_python(value, mode="json", by_alias=True)
            result["structuredContent"] = {"result": structured} if shape.wrap else structured
        elif is_model(value):
            result["structuredContent"] = value.model_dump(mode="json", by_alias=True)
        result["isError"] = False
        return result
