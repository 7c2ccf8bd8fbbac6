"""Write MCP servers whose tool calls run as resumable rounds that any replica can resume."""

from engine.app import MCPServer
from engine.calls.runner import Principal
from engine.context import Context, RequestScope
from engine.di.redacted import Redacted
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

__version__ = "0.1.0"

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
    "Principal",
    "ReadResourceContents",
    "Redacted",
    "RequestScope",
    "Resolve",
    "ResourceError",
    "Sample",
    "ToolError",
]
