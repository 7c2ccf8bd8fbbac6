"""``ResourceSecurity``: which values a resource template's variables may not take.

The checks run on the decoded values, after a URI matched a template and before the function
runs, so no encoding gets past them. A URI refused by them is answered as an unknown resource
(the client learns nothing of which check failed), and no later template is tried in its place.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.resources.path_safety import contains_path_traversal, is_absolute_path

if TYPE_CHECKING:
    from engine.resources.uri_template import UriTemplate


@dataclass(frozen=True)
class ResourceSecurity:
    """What template values are refused; every check is on unless turned off.

    Give one to ``@mcp.resource(uri, security=...)`` for that resource, or to
    ``MCPServer(resource_security=...)`` for every template registered without one.
    """

    reject_path_traversal: bool = True
    """``..`` parts that climb above the start (:func:`contains_path_traversal`)."""
    reject_absolute_paths: bool = True
    """``/etc/passwd``, ``C:\\x``, ``\\\\host\\share`` (:func:`is_absolute_path`)."""
    reject_null_bytes: bool = True
    """A NUL byte, which ends a path early in C and makes ``"..\\0"`` differ from ``".."``."""
    exempt_params: Set[str] = field(default_factory=frozenset)
    """Variables whose values are not checked (one that is not a path, say)."""

    def matched(self, template: UriTemplate, uri: str) -> dict[str, str | list[str]] | None:
        """The decoded values ``uri`` gives ``template``'s variables, or ``None`` when it does
        not fit; raises :class:`ResourceSecurityError` when it fits but a value is refused, so
        that no later template is tried in its place."""
        values = template.match(uri)
        if values is None:
            return None
        refused = self.validate(values)
        if refused is not None:
            raise ResourceSecurityError(template.template, refused)
        return values

    def validate(self, params: Mapping[str, str | list[str]]) -> str | None:
        """The name of the first variable whose value (or one of its list items) is refused,
        or ``None`` when all pass."""
        for name, value in params.items():
            if name in self.exempt_params:
                continue
            for item in value if isinstance(value, list) else (value,):
                if self.refuses(item):
                    return name
        return None

    def refuses(self, value: str) -> bool:
        return (
            (self.reject_null_bytes and "\0" in value)
            or (self.reject_path_traversal and contains_path_traversal(value))
            or (self.reject_absolute_paths and is_absolute_path(value))
        )


DEFAULT_RESOURCE_SECURITY = ResourceSecurity()
"""Every check on: the policy of a template nobody gave one."""


class ResourceSecurityError(ValueError):
    """A URI matched ``template`` but the value of ``param`` was refused."""

    def __init__(self, template: str, param: str) -> None:
        super().__init__(f"Template {template!r}: the value of {param!r} was refused")
        self.template = template
        self.param = param


__all__ = ["DEFAULT_RESOURCE_SECURITY", "ResourceSecurity", "ResourceSecurityError"]
