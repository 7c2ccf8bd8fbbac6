"""``Resource``: a function read by ``resources/read``, at a fixed URI or behind a URI template
whose ``{name}`` parts are its arguments."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Unpack

from engine.errors import InvalidSignature
from engine.handlers.base import Handler, HandlerOptions, description_of
from engine.role import Role
from engine.types import Icon


class ResourceOptions(HandlerOptions, total=False):
    """What a resource may be given besides what every handler may (``@mcp.resource(uri, ...)``)."""

    mime_type: str | None
    """Listed, and the type of what it reads; when not given, a ``str`` or ``bytes`` return
    annotation gives the listed one."""


_OPTIONS = ResourceOptions.__optional_keys__


class Resource(Handler):
    """A resource at a fixed URI, or a template whose ``{name}`` parts become arguments."""

    def __init__(
        self,
        fn: Callable[..., Any],
        uri: str,
        *,
        name: str | None = None,
        **options: Unpack[ResourceOptions],
    ) -> None:
        super().__init__(fn, Role.RESOURCE, name, options, _OPTIONS)
        resource_name, signature = self.name, self.signature
        self.uri = uri
        self.mime_type = mime_type = options.get("mime_type")
        self.params = re.findall(r"{(\w+)}", uri)
        self.is_template = bool(self.params)
        missing = set(self.params) ^ set(signature.argument_names)
        if self.is_template and missing:
            raise InvalidSignature(
                f"Resource template {uri!r} and function {resource_name!r} must name the same "
                f"parameters; mismatched: {sorted(missing)}"
            )
        self.pattern = re.compile(
            "^" + re.sub(r"\\{(\w+)\\}", r"(?P<\1>[^/]+)", re.escape(uri)) + "$"
        )
        if not self.is_template and signature.argument_names:
            raise InvalidSignature(
                f"Resource {uri!r} has parameters {signature.argument_names} but its URI has no "
                "{placeholders}; make it a template like 'scheme://{name}'"
            )
        icons = options.get("icons")
        listing: dict[str, Any] = {
            "name": resource_name,
            "title": options.get("title"),
            ("uriTemplate" if self.is_template else "uri"): uri,
            "description": description_of(fn, options.get("description")),
            "mimeType": mime_type or _default_mime(signature.return_type),
            "icons": [Icon.of(i).to_wire() for i in icons] if icons else None,
        }
        self.listing = {k: v for k, v in listing.items() if v is not None}

    def match(self, uri: str) -> dict[str, str] | None:
        found = self.pattern.match(uri)
        return found.groupdict() if found else None


def _default_mime(annotation: Any) -> str | None:
    if annotation is str:
        return "text/plain"
    if annotation is bytes:
        return "application/octet-stream"
    return None
