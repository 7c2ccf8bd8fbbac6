"""Write MCP servers whose tool calls run as resumable rounds that any replica can resume."""

from engine.context import Context
from engine.errors import InvalidSignature, MCPError, ResourceError, ToolError
from engine.graph import Resolve
from engine.handlers import ReadResourceContents
from engine.questions import (
    AcceptedElicitation,
    CancelledElicitation,
    DeclinedElicitation,
    Elicit,
    ElicitationResult,
    ElicitURL,
    ListRoots,
    Sample,
)
from engine.server import MCPServer

__all__ = [
    "AcceptedElicitation",
    "CancelledElicitation",
    "Context",
    "DeclinedElicitation",
    "Elicit",
    "ElicitURL",
    "ElicitationResult",
    "InvalidSignature",
    "ListRoots",
    "MCPError",
    "MCPServer",
    "ReadResourceContents",
    "Resolve",
    "ResourceError",
    "Sample",
    "ToolError",
]
