"""Write MCP servers whose tool calls run as resumable rounds that any replica can resume."""

from engine.app import MCPServer
from engine.context import Context
from engine.di.resolve import Resolve
from engine.errors import InvalidSignature, MCPError, ResourceError, ToolError
from engine.handlers.results import ReadResourceContents
from engine.questions.kinds import (
    AcceptedElicitation,
    CancelledElicitation,
    DeclinedElicitation,
    Elicit,
    ElicitationResult,
    ElicitURL,
    ListRoots,
    Sample,
)

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
