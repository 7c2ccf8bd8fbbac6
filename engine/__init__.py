"""Write MCP servers whose tool calls run as resumable rounds that any replica can resume."""

from typing import TYPE_CHECKING

from engine.app import MCPServer
from engine.auth.current import get_access_token
from engine.auth.provider import AccessToken, TokenVerifier
from engine.auth.settings import AuthSettings
from engine.calls.runner import Principal
from engine.context import Context
from engine.di.input_required import returns_input_required
from engine.di.redacted import Redacted
from engine.di.resolve import Resolve
from engine.errors import (
    InvalidRequestState,
    InvalidSignature,
    MCPError,
    ResourceError,
    ResourceNotFoundError,
    ToolError,
    UnexpectedResourceError,
    UnexpectedToolError,
)
from engine.extension import Extension, MethodBinding, ResourceBinding, ToolBinding
from engine.extensions import require_client_extension
from engine.handlers.results import ReadResourceContents
from engine.media import Audio, Image
from engine.middleware import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from engine.prompt_messages import AssistantMessage, Message, UserMessage
from engine.prompts import Prompt
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
from engine.resources.path_safety import PathEscapeError, safe_join
from engine.resources.security import (
    DEFAULT_RESOURCE_SECURITY,
    ResourceSecurity,
    ResourceSecurityError,
)
from engine.resources.uri_template import InvalidUriTemplate
from engine.scope import RequestScope
from engine.tools import Tool
from engine.types import Icon

if TYPE_CHECKING:
    from engine.auth.introspection import IntrospectionVerifier
    from engine.auth.jwt_verifier import JWTVerifier
    from engine.resources.base import Resource
    from engine.resources.kinds import (
        BinaryResource,
        DirectoryResource,
        FileResource,
        FunctionResource,
        HttpResource,
        TextResource,
    )
    from engine.resources.template import ResourceTemplate

__version__ = "0.1.0"

_VERIFIERS = {
    "JWTVerifier": "engine.auth.jwt_verifier",
    "IntrospectionVerifier": "engine.auth.introspection",
}
"""Imported when first named: they load PyJWT and httpx, which a server without auth never
needs."""

_RESOURCE_OBJECTS = {
    "Resource": "engine.resources.base",
    "TextResource": "engine.resources.kinds",
    "BinaryResource": "engine.resources.kinds",
    "FunctionResource": "engine.resources.kinds",
    "FileResource": "engine.resources.kinds",
    "HttpResource": "engine.resources.kinds",
    "DirectoryResource": "engine.resources.kinds",
    "ResourceTemplate": "engine.resources.template",
}
"""Imported when first named: a server of functions alone never builds their models."""


def __getattr__(name: str) -> object:
    module = _VERIFIERS.get(name) or _RESOURCE_OBJECTS.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "DEFAULT_RESOURCE_SECURITY",
    "AcceptedElicitation",
    "AccessToken",
    "AssistantMessage",
    "Audio",
    "AuthSettings",
    "BinaryResource",
    "CallNext",
    "CancelledElicitation",
    "Context",
    "DeclinedElicitation",
    "DirectoryResource",
    "Elicit",
    "ElicitURL",
    "ElicitationResult",
    "Extension",
    "FileResource",
    "FunctionResource",
    "HandlerResult",
    "HttpResource",
    "Icon",
    "Image",
    "IntrospectionVerifier",
    "InvalidRequestState",
    "InvalidSignature",
    "InvalidUriTemplate",
    "JWTVerifier",
    "ListRoots",
    "MCPError",
    "MCPServer",
    "Message",
    "MethodBinding",
    "PathEscapeError",
    "Principal",
    "Prompt",
    "ReadResourceContents",
    "Redacted",
    "RequestScope",
    "RequestStateCodec",
    "RequestStateSecurity",
    "Resolve",
    "Resource",
    "ResourceBinding",
    "ResourceError",
    "ResourceNotFoundError",
    "ResourceSecurity",
    "ResourceSecurityError",
    "ResourceTemplate",
    "Sample",
    "ServerMiddleware",
    "ServerRequestContext",
    "TextResource",
    "TokenVerifier",
    "Tool",
    "ToolBinding",
    "ToolError",
    "UnexpectedResourceError",
    "UnexpectedToolError",
    "UserMessage",
    "authenticated_principal",
    "get_access_token",
    "require_client_extension",
    "returns_input_required",
    "safe_join",
]
