"""A tool whose result is an empty list, for ``python -m engine serve`` in the interop tests.

Its output schema is ``{"result": array}``, so ``[]`` must come back as structured content
``{"result": []}`` (an empty value is still a value).
"""

from engine import MCPServer

mcp = MCPServer("Empty shelf")


@mcp.tool()
def no_books() -> list[str]:
    """List the books on an empty shelf."""
    return []
