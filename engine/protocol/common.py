"""What both eras serve alike: the listings, ``completion/complete``, and the checks of the
parameters that name what a request is about."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.errors import INVALID_PARAMS, METHOD_NOT_FOUND, MCPError
from engine.protocol.served import ExtensionMethod, Served

Listing = Callable[[Served], dict[str, Any]]

LISTINGS: dict[str, Listing] = {
    "tools/list": lambda server: {"tools": server.registry.list_tools()},
    "prompts/list": lambda server: {"prompts": server.registry.list_prompts()},
    "resources/list": lambda server: {"resources": server.registry.list_resources()},
    "resources/templates/list": lambda server: {
        "resourceTemplates": server.registry.list_resource_templates()
    },
}
"""Each listing method's result: every item, under its key (one page in both eras)."""


def extension_method(server: Served, method: str) -> ExtensionMethod:
    """What serves a method the protocol does not define: an extension's; ``Method not found``
    (the method named in the error's data) when no extension serves it."""
    serve = server.extension_methods.get(method)
    if serve is None:
        raise MCPError(METHOD_NOT_FOUND, "Method not found", method)
    return serve


def unannounced(capabilities: dict[str, Any]) -> dict[str, Any]:
    """The capabilities of a server that can tell this client of no change: no ``listChanged``,
    no ``subscribe`` (there is no stream the notifications could travel on)."""
    return {
        **capabilities,
        "tools": {"listChanged": False},
        "prompts": {"listChanged": False},
        "resources": {"listChanged": False, "subscribe": False},
    }


def string_param(params: dict[str, Any], name: str) -> str:
    """``params[name]``, which must be a string (a tool's name, a prompt's, a URI)."""
    value = params.get(name)
    if not isinstance(value, str):
        raise MCPError(INVALID_PARAMS, f"Invalid params: {name!r} must be a string")
    return value


def arguments_param(params: dict[str, Any]) -> dict[str, Any] | None:
    """``params["arguments"]``: an object, or absent."""
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        raise MCPError(INVALID_PARAMS, "Invalid params: 'arguments' must be an object")
    return arguments


async def complete(server: Served, params: dict[str, Any]) -> dict[str, Any]:
    """``completion/complete``: the server's completer's suggestions for one argument."""
    return {"completion": await server.complete(params)}
