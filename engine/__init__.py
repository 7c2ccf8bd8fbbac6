"""Write MCP servers whose tool calls run as resumable rounds that any replica can resume."""

from typing import TYPE_CHECKING

from engine.app import MCPServer
from engine.auth.provider import AccessToken, TokenVerifier
from engine.auth.settings import AuthSettings
from engine.calls.runner import Principal
from engine.context import Context, RequestScope
from engine.di.input_required import returns_input_required
from engine.di.redacted import Redacted
from engine.di.resolve import Resolve
from engine.errors import (
    InvalidRequestState,
    InvalidSignature,
    MCPError,
    ResourceError,
    ToolError,
)
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
from engine.request_state import (
    RequestStateCodec,
    RequestStateSecurity,
    authenticated_principal,
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
    "InvalidRequestState",
    "InvalidSignature",
    "JWTVerifier",
    "ListRoots",
    "MCPError",
    "MCPServer",
    "Principal",
    "ReadResourceContents",
    "Redacted",
    "RequestScope",
    "RequestStateCodec",
    "RequestStateSecurity",
    "Resolve",
    "ResourceError",
    "Sample",
    "TokenVerifier",
    "ToolError",
    "authenticated_principal",
    "returns_input_required",
]
