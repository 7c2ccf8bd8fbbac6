"""What a server offers: its tools, prompts, resources and resource templates, by name or URI."""

from __future__ import annotations

import logging
from typing import Any, TypeVar

from engine.completions import Completer
from engine.errors import ToolError
from engine.handlers.base import Handler
from engine.handlers.prompt import Prompt
from engine.handlers.resource import Resource
from engine.handlers.tool import Tool
from engine.resources.security import ResourceSecurityError
from engine.settings import RegistrySettings

log = logging.getLogger("engine.registry")


class Registry:
    """The handlers registered on one server; analysed when added, looked up per request."""

    def __init__(self, duplicates: RegistrySettings | None = None) -> None:
        self.duplicates = RegistrySettings.of({}) if duplicates is None else duplicates
        """The ``warn_on_duplicate_*`` switches, read at each registration (code may set them)."""
        self.tools: dict[str, Tool] = {}
        self.prompts: dict[str, Prompt] = {}
        self.resources: dict[str, Resource] = {}
        """Resources at fixed URIs, by URI."""
        self.templates: dict[str, Resource] = {}
        """Resource templates, by URI template."""
        self.completer: Completer | None = None

    def add_tool(self, tool: Tool) -> Tool:
        """Register ``tool``; under a name already taken the first one stays (see
        :func:`_known`)."""
        known = _known(self.tools, tool.name, tool, "Tool", self.duplicates.tools)
        if known is None:
            self.tools[tool.name] = known = tool
        return known

    def put_tool(self, tool: Tool) -> Tool:
        """Register ``tool`` as the official server takes its ``tools=[...]``: under a name
        already taken the later one replaces the first, with the warning of :func:`_known`."""
        _known(self.tools, tool.name, tool, "Tool", self.duplicates.tools)
        self.tools[tool.name] = tool
        return tool

    def remove_tool(self, name: str) -> None:
        if self.tools.pop(name, None) is None:
            raise ToolError(f"Unknown tool: {name}")

    def add_prompt(self, prompt: Prompt) -> Prompt:
        known = _known(self.prompts, prompt.name, prompt, "Prompt", self.duplicates.prompts)
        if known is None:
            self.prompts[prompt.name] = known = prompt
        return known

    def remove_prompt(self, name: str) -> None:
        if self.prompts.pop(name, None) is None:
            raise ValueError(f"Unknown prompt: {name}")

    def add_resource(self, resource: Resource) -> Resource:
        """Register ``resource``: at a URI already taken the first one stays (see
        :func:`_known`); behind a template already taken the new one replaces it, silently, as
        the official server's resource templates do."""
        if resource.is_template:
            self.templates[resource.uri] = resource
            return resource
        known = _known(
            self.resources, resource.uri, resource, "Resource", self.duplicates.resources
        )
        if known is None:
            self.resources[resource.uri] = known = resource
        return known

    def find_resource(self, uri: str) -> tuple[Resource, dict[str, str | list[str]]] | None:
        """The resource at ``uri`` and the template values it matched (``{}`` for a fixed
        URI), or ``None``: also when the first template that fits refuses a value (its
        ``ResourceSecurity``), without trying the next."""
        resource = self.resources.get(uri)
        if resource is not None:
            return resource, {}
        for template in self.templates.values():
            try:
                params = template.match(uri)
            except ResourceSecurityError:
                return None
            if params is not None:
                return template, params
        return None

    def declared_scopes(self) -> set[str]:
        """Every scope some handler requires."""
        handlers: list[Handler] = [
            *self.tools.values(),
            *self.prompts.values(),
            *self.resources.values(),
            *self.templates.values(),
        ]
        return {scope for handler in handlers for scope in handler.scopes}

    def target_scopes(self, method: Any, params: Any) -> tuple[str, ...]:
        """The scopes of the handler a ``tools/call``, ``prompts/get`` or ``resources/read``
        names; none for other requests, or a target that is not there (the protocol layer
        answers those)."""
        if type(params) is not dict:
            return ()
        handler: Handler | None = None
        if method == "tools/call":
            name = params.get("name")
            handler = self.tools.get(name) if type(name) is str else None
        elif method == "prompts/get":
            name = params.get("name")
            handler = self.prompts.get(name) if type(name) is str else None
        elif method == "resources/read":
            uri = params.get("uri")
            found = self.find_resource(uri) if type(uri) is str else None
            handler = found[0] if found is not None else None
        return handler.scopes if handler is not None else ()

    def list_tools(self) -> list[dict[str, Any]]:
        return [tool.listing for tool in self.tools.values()]

    def list_prompts(self) -> list[dict[str, Any]]:
        return [prompt.listing for prompt in self.prompts.values()]

    def list_resources(self) -> list[dict[str, Any]]:
        return [resource.listing for resource in self.resources.values()]

    def list_resource_templates(self) -> list[dict[str, Any]]:
        return [template.listing for template in self.templates.values()]


H = TypeVar("H", bound=Handler)


def _known(table: dict[str, H], key: str, handler: H, kind: str, warn: bool) -> H | None:
    """The handler already registered under ``key``, or ``None`` when the key is free.

    Another function under a taken key leaves the first in place, as the official server does:
    with a warning (its wording, which ported tests look for) or, with the
    ``warn_on_duplicate_*`` switch off, silently. The same function again changes nothing and
    says nothing: a tool that registers another each time it runs is not a mistake.
    """
    existing = table.get(key)
    if existing is None:
        return None
    if existing.fn != handler.fn and warn:
        log.warning("%s already exists: %s", kind, key)
    return existing


__all__ = ["Registry"]
