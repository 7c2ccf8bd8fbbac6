"""``Tool``: a function listed under ``tools/list`` and run by ``tools/call``; its input and output
schemas are fixed at registration, and :meth:`Tool.result` builds each ``CallToolResult``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Unpack

from engine._internal.introspect import callable_name
from engine.handlers.base import Handler, HandlerOptions, description_of
from engine.handlers.content import as_call_tool_result
from engine.handlers.output import output_shape
from engine.handlers.param_headers import check_param_headers
from engine.handlers.results import content_blocks
from engine.handlers.task_policy import TaskOption, TaskPolicy
from engine.role import Role
from engine.types import Icon, ToolAnnotations


class ToolOptions(HandlerOptions, total=False):
    """What a tool may be given besides what every handler may (``@mcp.tool(...)``)."""

    annotations: ToolAnnotations | Mapping[str, Any] | None
    """A `ToolAnnotations`, a dict of its fields, or any model of that shape."""
    meta: dict[str, Any] | None
    """Listed as the tool's ``_meta``."""
    structured_output: bool | None
    """``False``: no output schema and no structured content, whatever the return annotation;
    ``True``: a return annotation no schema can be built from is refused at registration."""
    input_schema: dict[str, Any] | None
    """Replaces the listed schema; the arguments are still validated against the parameters."""
    task: TaskOption
    """Run the body as a task (docs/tasks.md): ``True`` when the client takes tasks,
    ``"required"`` always, or a function of the arguments deciding call by call."""


_OPTIONS = ToolOptions.__optional_keys__


class Tool(Handler):
    def __init__(
        self, fn: Callable[..., Any], name: str | None = None, **options: Unpack[ToolOptions]
    ) -> None:
        super().__init__(fn, Role.TOOL, name, options, _OPTIONS)
        tool_name, signature = self.name, self.signature
        # The output schema's title names the function, not the tool, as the official SDK's.
        self.shape = shape = output_shape(
            callable_name(fn), signature.return_type, options.get("structured_output")
        )
        input_schema = options.get("input_schema")
        if input_schema is None:
            input_schema = {"type": "object", **signature.arguments.model_json_schema()}
        self.param_headers: dict[str, str] = check_param_headers(tool_name, input_schema)
        """The ``Mcp-Param-*`` header each argument is mirrored in, by argument."""
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
        else:
            returned = as_call_tool_result(value)
            if returned is not None:
                if self.shape.adapter is not None and not returned.is_error:
                    self.shape.validated(returned.structured_content)
                return returned.to_wire()
            content = content_blocks(value)
        result: dict[str, Any] = {"content": content}
        shape = self.shape
        if shape.adapter is not None:
            if type(value) is shape.scalar:  # its own JSON: no call for the usual case
                result["structuredContent"] = {"result": value}
            else:
                result["structuredContent"] = shape.structured(value)
        result["isError"] = False
        return result
