"""``ResourceTemplate``: a function behind a URI template, as an object of its own.

``@mcp.resource("scheme://{var}")`` is how a server serves a template (with resolvers and
questions, like any handler). This object is the same idea in code: match a URI, check its
values, and make the :class:`FunctionResource` one URI reads.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import anyio.to_thread
from pydantic import ConfigDict, Field, PrivateAttr, validate_call

from engine._internal.introspect import flavour, type_hints
from engine.di.annotations import is_context_annotation
from engine.errors import TEMPLATE_FAILED, MCPError, ResourceError, UnexpectedResourceError
from engine.input_requests import input_required_of
from engine.resources.base import Listed, listed_as
from engine.resources.kinds import FunctionResource
from engine.resources.security import DEFAULT_RESOURCE_SECURITY, ResourceSecurity
from engine.resources.uri_template import UriTemplate
from engine.types import Annotations, Icon


class ResourceTemplate(Listed):
    """A function whose arguments are the variables of ``uri_template``; build one with
    :meth:`from_function`."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    uri_template: str
    name: str
    fn: Callable[..., Any] = Field(exclude=True)
    security: ResourceSecurity = Field(default=DEFAULT_RESOURCE_SECURITY, exclude=True)
    context_kwarg: str | None = None
    """The parameter that receives the request's ``Context``, if the function takes one."""
    _parsed: UriTemplate = PrivateAttr()
    _is_async: bool = PrivateAttr(default=False)

    def model_post_init(self, context: Any, /) -> None:
        self._parsed = UriTemplate.parse(self.uri_template)
        self._is_async = flavour(self.fn)[0]

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        uri_template: str,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        icons: list[Icon] | None = None,
        annotations: Annotations | None = None,
        meta: dict[str, Any] | None = None,
        context_kwarg: str | None = None,
        security: ResourceSecurity = DEFAULT_RESOURCE_SECURITY,
    ) -> ResourceTemplate:
        """The template ``fn`` serves; a malformed ``uri_template`` raises
        :class:`~engine.resources.uri_template.InvalidUriTemplate`. The arguments a URI gives
        (strings) are converted to the function's parameter types when it is called."""
        template_name, listed_description = listed_as(fn, name, description, "template")
        UriTemplate.parse(uri_template)
        if context_kwarg is None:
            context_kwarg = next(
                (key for key, hint in type_hints(fn).items() if is_context_annotation(hint)),
                None,
            )
        validated = validate_call(config=ConfigDict(arbitrary_types_allowed=True))(fn)
        return cls(
            uri_template=uri_template,
            name=template_name,
            title=title,
            description=listed_description,
            mime_type=mime_type or "text/plain",
            icons=icons,
            annotations=annotations,
            meta=meta,
            fn=validated,
            context_kwarg=context_kwarg,
            security=security,
        )

    def matches(self, uri: str) -> dict[str, str | list[str]] | None:
        """The decoded values ``uri`` gives the template's variables, or ``None`` when it does
        not fit; :class:`ResourceSecurityError` when it fits but a value is refused."""
        return self.security.matched(self._parsed, uri)

    async def create_resource(self, uri: str, params: dict[str, Any], context: Any) -> Any:
        """Call the function with ``params`` (and ``context``, when it takes one) and return
        the resource at ``uri`` holding its value; a value that asks the client for input (an
        ``InputRequiredResult``) is returned as it is. A ``ResourceError`` or ``MCPError`` from
        the function propagates; anything else becomes an :class:`UnexpectedResourceError`."""
        arguments = dict(params)
        if self.context_kwarg is not None:
            arguments[self.context_kwarg] = context
        try:
            if self._is_async:
                result = await self.fn(**arguments)
            else:
                result = await anyio.to_thread.run_sync(functools.partial(self.fn, **arguments))
        except (ResourceError, MCPError):
            raise
        except Exception as exc:
            raise UnexpectedResourceError(f"{TEMPLATE_FAILED} {uri}") from exc
        if input_required_of(result) is not None:
            return result
        return FunctionResource(
            uri=uri,
            name=self.name,
            title=self.title,
            description=self.description,
            mime_type=self.mime_type,
            icons=self.icons,
            annotations=self.annotations,
            meta=self.meta,
            fn=lambda: result,
        )


__all__ = ["ResourceTemplate"]
