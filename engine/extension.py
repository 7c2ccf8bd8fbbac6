"""``Extension``: what an extension given to ``MCPServer(extensions=[...])`` subclasses, and the
bindings its methods return (``ToolBinding``, ``ResourceBinding``, ``MethodBinding``).

A subclass sets ``identifier`` and overrides only what it contributes; every method has a
default that contributes nothing. The server takes any object of this shape
(:class:`ExtensionLike`), the official SDK's ``Extension`` subclasses among them, so the class
is a convenience, not a requirement. ``engine/extensions.py`` applies them to a server.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel

from engine.middleware import CallNext, HandlerResult, ServerRequestContext

_LABEL = r"[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
IDENTIFIER = re.compile(rf"{_LABEL}(?:\.{_LABEL})*/[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
"""An extension's identifier: dot-separated labels, a slash, a name (the ``_meta`` key grammar
with its prefix required)."""

MethodHandler = Callable[[ServerRequestContext[Any, Any], Any], Awaitable[HandlerResult]]
"""``handler(ctx, params)`` of an extension's method: ``params`` validated as its
``params_type``; returns the result (a pydantic model or a dict of its wire form)."""


def check_identifier(identifier: object, owner: str) -> str:
    """``identifier`` when it is ``vendor.prefix/name``; a ``TypeError`` naming ``owner``
    otherwise."""
    if not isinstance(identifier, str) or not IDENTIFIER.fullmatch(identifier):
        raise TypeError(
            f"{owner}.identifier must be 'vendor.prefix/name' (a reverse-DNS prefix, a slash, a "
            f"name), got {identifier!r}"
        )
    return identifier


@dataclass(frozen=True, slots=True)
class ToolBinding:
    """A tool the extension adds: registered as ``mcp.add_tool(fn, meta=meta, **kwargs)``."""

    fn: Callable[..., Any]
    meta: dict[str, Any] | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ResourceBinding:
    """A resource object the extension adds (``TextResource``, ..., or any object with a
    ``uri`` and an async ``read()``), registered as ``mcp.add_resource(resource)``."""

    resource: Any


@dataclass(frozen=True, slots=True)
class MethodBinding:
    """A request method the extension serves itself: ``params`` validated as ``params_type``,
    then ``handler(ctx, params)``. ``protocol_versions``: the versions it is served in (another
    gets ``Method not found``); ``None`` for every version."""

    method: str
    params_type: type[BaseModel]
    handler: MethodHandler
    protocol_versions: frozenset[str] | None = None

    def __post_init__(self) -> None:
        if self.protocol_versions is not None and not self.protocol_versions:
            raise ValueError(
                f"MethodBinding {self.method!r} has an empty protocol_versions: it would never "
                "be served; give None to serve it in every version"
            )


class ExtensionLike(Protocol):
    """What the server reads of an extension: :class:`Extension` or any object of its shape."""

    identifier: str

    def settings(self) -> Mapping[str, Any]: ...

    def tools(self) -> Sequence[Any]: ...

    def resources(self) -> Sequence[Any]: ...

    def methods(self) -> Sequence[Any]: ...

    def intercept_tool_call(
        self, params: Any, ctx: ServerRequestContext[Any, Any], call_next: CallNext, /
    ) -> Awaitable[Any]: ...


class Extension:
    """An extension (SEP-2133): subclass it, set ``identifier``, override what it adds."""

    identifier: str
    """``vendor.prefix/name``; advertised under ``capabilities.extensions``. Checked when the
    class is made if set on the class, else when the extension is given to a server."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "identifier" in cls.__dict__:
            check_identifier(cls.__dict__["identifier"], cls.__name__)

    def settings(self) -> Mapping[str, Any]:
        """Advertised under ``capabilities.extensions[identifier]``; none by default."""
        return {}

    def tools(self) -> Sequence[ToolBinding]:
        return ()

    def resources(self) -> Sequence[ResourceBinding]:
        return ()

    def methods(self) -> Sequence[MethodBinding]:
        return ()

    async def intercept_tool_call(
        self, params: Any, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> Any:
        """Around every ``tools/call`` (``params.name``, ``params.arguments``): pass it on with
        ``await call_next(ctx)``, or answer it with a result of your own. Passes it on by
        default, and the server wraps calls only for extensions that override this."""
        return await call_next(ctx)


__all__ = [
    "IDENTIFIER",
    "Extension",
    "ExtensionLike",
    "MethodBinding",
    "MethodHandler",
    "ResourceBinding",
    "ToolBinding",
    "check_identifier",
]
