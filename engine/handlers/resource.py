"""``Resource``: a function read by ``resources/read``, at a fixed URI or behind an RFC 6570 URI
template whose variables are its arguments; or a resource object (``TextResource``,
``FileResource``, ...) whose ``read()`` is run the same way."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, Unpack, cast

from engine.errors import InvalidSignature
from engine.handlers.base import Handler, HandlerOptions, description_of
from engine.handlers.results import resource_contents
from engine.resources.security import DEFAULT_RESOURCE_SECURITY, ResourceSecurity
from engine.resources.uri_template import UriTemplate
from engine.role import Role
from engine.types import Annotations, Icon

DEFAULT_MIME_TYPE = "text/plain"
"""Listed, and sent with what is read, for a resource given no ``mime_type``."""


class ResourceOptions(HandlerOptions, total=False):
    """What a resource may be given besides what every handler may (``@mcp.resource(uri, ...)``)."""

    mime_type: str | None
    """Listed, and sent with each read; ``text/plain`` when not given, whatever is returned."""
    annotations: Annotations | Mapping[str, Any] | None
    """Listed: ``audience``, ``priority``, ``lastModified`` (an ``Annotations``, a dict of its
    fields, or any model of that shape)."""
    meta: dict[str, Any] | None
    """Listed as ``_meta``, and sent as the ``_meta`` of what is read."""
    security: ResourceSecurity | None
    """A template's policy for its variables' values; the server's ``resource_security`` when
    not given."""


_OPTIONS = ResourceOptions.__optional_keys__


class ResourceSignatureMismatch(InvalidSignature, ValueError):
    """A function whose parameters are not its URI template's variables."""


class ReadableResource(Protocol):
    """A resource object: what ``mcp.add_resource(resource)`` takes (``engine.Resource`` and
    its kinds, or anything with these attributes)."""

    uri: str
    name: str | None
    title: str | None
    description: str | None
    mime_type: str
    icons: Sequence[Any] | None
    annotations: Any
    meta: dict[str, Any] | None

    async def read(self) -> str | bytes: ...


class TemplateObject(Protocol):
    """A resource template as an object (``engine.ResourceTemplate``, or anything with these
    attributes): ``fn`` takes the template's variables as its arguments."""

    uri_template: str
    name: str
    title: str | None
    description: str | None
    mime_type: str
    icons: Sequence[Any] | None
    annotations: Any
    meta: dict[str, Any] | None
    fn: Callable[..., Any]
    security: ResourceSecurity


ResourceObject = ReadableResource | TemplateObject
"""What ``mcp.add_resource(obj)`` takes alone."""


class Resource(Handler):
    """A resource at a fixed URI, or a template whose variables become arguments."""

    def __init__(
        self,
        fn: Callable[..., Any],
        uri: str,
        *,
        name: str | None = None,
        literal: bool = False,
        **options: Unpack[ResourceOptions],
    ) -> None:
        """``literal``: ``uri`` is the resource's URI as it is, even with braces in it."""
        super().__init__(fn, Role.RESOURCE, name, options, _OPTIONS)
        self.uri = uri
        parsed = None if literal else UriTemplate.parse(uri)
        self.template = parsed if parsed is not None and parsed.variables else None
        self.is_template = self.template is not None
        if parsed is not None:
            _check_parameters(uri, parsed, self.signature.arguments.model_fields)
        self.security = options.get("security") or DEFAULT_RESOURCE_SECURITY
        self.mime_type = options.get("mime_type") or DEFAULT_MIME_TYPE
        self.meta = options.get("meta")
        icons, annotations = options.get("icons"), options.get("annotations")
        listing: dict[str, Any] = {
            "name": self.name,
            "title": options.get("title"),
            ("uriTemplate" if self.is_template else "uri"): uri,
            "description": description_of(fn, options.get("description")),
            "mimeType": self.mime_type,
            "icons": [Icon.of(i).to_wire() for i in icons] if icons else None,
            "annotations": Annotations.of(annotations).to_wire() if annotations else None,
            "_meta": self.meta,
        }
        self.listing = {k: v for k, v in listing.items() if v is not None}

    def match(self, uri: str) -> dict[str, str | list[str]] | None:
        """The template's values for ``uri`` (:meth:`ResourceSecurity.matched`)."""
        if self.template is None:
            return None
        return self.security.matched(self.template, uri)

    def contents(self, uri: str, value: Any) -> dict[str, Any]:
        """The ``resources/read`` result for what the function returned, read at ``uri``."""
        return {"contents": resource_contents(uri, value, self.mime_type, self.meta)}


def resource_of(resource: ResourceObject) -> Resource:
    """The handler serving a resource object: a template object's function behind its
    template; any other object at its URI, taken as it is (never a template), its fields
    listed and each read awaiting its ``read()``."""
    if isinstance(getattr(resource, "uri_template", None), str):
        return _template_handler(cast(TemplateObject, resource))
    return _read_handler(cast(ReadableResource, resource))


def _template_handler(template: TemplateObject) -> Resource:
    return Resource(
        template.fn,
        template.uri_template,
        name=template.name,
        title=template.title,
        description=template.description,
        mime_type=template.mime_type,
        icons=template.icons,
        annotations=template.annotations,
        meta=template.meta,
        security=template.security,
    )


def _read_handler(resource: ReadableResource) -> Resource:

    async def read() -> str | bytes:
        content: object = await resource.read()
        if not isinstance(content, str | bytes):
            raise TypeError(
                f"Resource.read() must return str or bytes, not {type(content).__name__}"
            )
        return content

    uri = str(resource.uri)
    # Read with defaults: an object of another library may lack some of these.
    description = getattr(resource, "description", None)
    handler = Resource(
        read,
        uri,
        literal=True,
        name=getattr(resource, "name", None) or uri,
        title=getattr(resource, "title", None),
        description=description or "",
        mime_type=getattr(resource, "mime_type", None),
        icons=getattr(resource, "icons", None),
        annotations=getattr(resource, "annotations", None),
        meta=getattr(resource, "meta", None),
    )
    if description is None:  # listed without one, as the object has none
        del handler.listing["description"]
    return handler


def _check_parameters(uri: str, parsed: UriTemplate, fields: Mapping[str, Any]) -> None:
    """A template's variables are the function's arguments, each a client may leave out (a
    query variable) with a default; a fixed URI's function takes no arguments."""
    arguments = set(fields)
    if not parsed.variables:
        if arguments:
            raise ResourceSignatureMismatch(
                f"Resource {uri!r} has no URI template variables, but its function takes "
                f"{sorted(arguments)}: add a {{name}} variable to the URI for each, or remove "
                "the parameters"
            )
        return
    variables = set(parsed.variable_names)
    if variables != arguments:
        raise ResourceSignatureMismatch(
            f"Mismatch between URI parameters {variables} and function parameters {arguments}"
        )
    without_default = sorted(
        name for name in parsed.query_variable_names if fields[name].is_required()
    )
    if without_default:
        raise ResourceSignatureMismatch(
            f"Resource {uri!r}: query parameter(s) {without_default} have no default value. "
            "A client may omit a {?...}/{&...} query parameter, so the matching handler "
            "parameter must declare a default."
        )


__all__ = [
    "DEFAULT_MIME_TYPE",
    "ReadableResource",
    "Resource",
    "ResourceObject",
    "ResourceOptions",
    "ResourceSignatureMismatch",
    "TemplateObject",
    "resource_of",
]
