"""``Tool``: a tool made from a function without the decorator, to give a server as it is made
(``MCPServer(tools=[...])``), as the official SDK's ``Tool.from_function`` records are given to
its server.

It is the record ``@mcp.tool()`` makes, with :meth:`Tool.from_function`, the official SDK's way
to make one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Self

from engine.handlers import tool
from engine.types import Icon, ToolAnnotations


class Tool(tool.Tool):
    """A tool: a function, the name and description it is listed with, and its arguments."""

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        context_kwarg: str | None = None,
        annotations: ToolAnnotations | Mapping[str, Any] | None = None,
        icons: Sequence[Icon | Mapping[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        structured_output: bool | None = None,
    ) -> Self:
        """The tool ``@mcp.tool(name, title=..., ...)`` would register for ``fn``; give it to
        ``MCPServer(tools=[...])``.

        The ``Context`` parameter is found by its annotation; ``context_kwarg`` may name it,
        and must then name a parameter annotated ``Context``.
        """
        made = cls(
            fn,
            name,
            title=title,
            description=description,
            annotations=annotations,
            icons=icons,
            meta=meta,
            structured_output=structured_output,
        )
        made.check_context_kwarg(context_kwarg)
        return made


__all__ = ["Tool"]
