"""Write MCP servers whose tool calls run as resumable rounds that any replica can resume."""

from typing import TYPE_CHECKING

from engine.app import MCPServer
from engine.auth.provider import AccessToken, TokenVerifier
from engine.auth.settings import AuthSettings
from engine.calls.runner import Principal
from engine.context import Context, RequestScope
from engine.di.redacted import Redacted
from engine.di.resolve import Resolve
from engine.errors import InvalidSignature, MCPError, ResourceError, ToolError
from engine.extensions import require_client_extension
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

if TYPE_CHECKING:
    from engine.auth.introspection import IntrospectionVerifier
    from engine.auth.jwt_verifier import JWTVerifier

__version__ = "0.1.0"

_VERIFIERS = {
    "JWTVerifier": "engine.auth.jwt_verifier",
    "IntrospectionVerifier": "engine.auth.introspection",
}
"""Imported when first named: they load PyJWT and httpx, which a server without auth never
needs."""


def __getattr__(name: str) -> object:
    module = _VERIFIERS.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "AcceptedElicitation",
    "AccessToken",
    "AuthSettings",
    "CancelledElicitation",
    "Context",
    "DeclinedElicitation",
    "Elicit",
    "ElicitURL",
    "ElicitationResult",
    "IntrospectionVerifier",
    "InvalidSignature",
    "JWTVerifier",
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
    "TokenVerifier",
    "ToolError",
    "require_client_extension",
]
