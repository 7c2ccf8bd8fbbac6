"""``Resource``: a resource as an object, listed from its fields and read by its ``read()``.

Subclass it for a resource whose content comes from somewhere of your own, or use a kind that
exists (``TextResource``, ``FileResource``, ...), and register it with
``mcp.add_resource(resource)``. A function is the other way to write one (``@mcp.resource``);
only a function can be a template, or ask the client a question.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from engine.types import Annotations, Icon, WireModel, wire_of


class Listed(BaseModel):
    """What a resource object and a template object are listed with, besides their URI and
    name."""

    model_config = ConfigDict(validate_default=True, extra="forbid")

    title: str | None = None
    description: str | None = None
    mime_type: str = "text/plain"
    icons: list[Icon] | None = None
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = None
    """Listed as ``_meta``, and sent as the ``_meta`` of what is read."""

    @field_validator("icons", "annotations", mode="before")
    @classmethod
    def _wire_shaped(cls, value: Any) -> Any:
        """Accept another library's model of the same wire shape (``mcp_types.Icon``...)."""
        return wire_shaped(value)


class Resource(Listed, abc.ABC):
    """What every resource object has; ``name`` is its URI when not given."""

    uri: str
    name: str | None = None

    @field_validator("name", mode="before")
    @classmethod
    def _name_or_uri(cls, name: str | None, info: ValidationInfo) -> str:
        if name:
            return name
        uri = info.data.get("uri")
        if uri:
            return str(uri)
        raise ValueError("Either name or uri must be provided: a resource is listed by its name")

    @abc.abstractmethod
    async def read(self) -> str | bytes:
        """The content: ``str`` is sent as text, ``bytes`` as a base64 blob."""


def wire_shaped(value: Any) -> Any:
    """``value`` (or each item of a list) as its wire dict when it is another library's model,
    for a field typed with one of ``engine.types``'s."""
    if isinstance(value, list):
        return [wire_shaped(item) for item in value]
    if isinstance(value, BaseModel) and not isinstance(value, WireModel):
        return wire_of(value)
    return value


def listed_as(
    fn: Callable[..., Any], name: str | None, description: str | None, kind: str
) -> tuple[str, str]:
    """The name and description an object made from ``fn`` is listed with: ``name``, else the
    function's; ``description``, else its docstring. A lambda has no name to list."""
    listed_name = name or getattr(fn, "__name__", None)
    if not listed_name or listed_name == "<lambda>":
        raise ValueError(f"A lambda has no name to list: give the {kind} one with name=")
    return listed_name, description or fn.__doc__ or ""


__all__ = ["Listed", "Resource", "listed_as", "wire_shaped"]
