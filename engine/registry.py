"""What a server offers: its tools, prompts, resources and resource templates, by name or URI."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.handlers.prompt import Prompt
from engine.handlers.resource import Resource
from engine.handlers.tool import Tool

Completer = Callable[..., Any]
"""``completer(ref, argument, context)`` -> suggested values (or an awaitable of them)."""


class Registry:
    """The handlers registered on one server; analysed when added, looked up per request."""

    def __init__(self) -> None:
        self.tools: dict[str, Tool] = {}
        self.prompts: dict[str, Prompt] = {}
        self.resources: dict[str, Resource] = {}
        """Resources at fixed URIs, by URI."""
        self.templates: dict[str, Resource] = {}
        """Resource templates, by URI template."""
        self.completer: Completer | None = None

    def add_tool(self, tool: Tool) -> Tool:
        self.tools[tool.name] = tool
        return tool

    def remove_tool(self, name: str) -> None:
        if self.tools.pop(name, None) is None:
            raise KeyError(f"Unknown tool: {name}")

    def add_prompt(self, prompt: Prompt) -> Prompt:
        self.prompts[prompt.name] = prompt
        return prompt

    def add_resource(self, resource: Resource) -> Resource:
        if resource.is_template:
            self.templates[resource.uri] = resource
        else:
            self.resources[resource.uri] = resource
        return resource

    def find_resource(self, uri: str) -> tuple[Resource, dict[str, str]] | None:
        """The resource at ``uri`` and the template parameters it matched (``{}`` for a fixed
        URI), or ``None``."""
        resource = self.resources.get(uri)
        if resource is not None:
            return resource, {}
        for template in self.templates.values():
            params = template.match(uri)
            if params is not None:
                return template, params
        return None

    def list_tools(self) -> list[dict[str, Any]]:
        return [tool.listing for tool in self.tools.values()]

    def list_prompts(self) -> list[dict[str, Any]]:
        return [prompt.listing for prompt in self.prompts.values()]

    def list_resources(self) -> list[dict[str, Any]]:
        return [resource.listing for resource in self.resources.values()]

    def list_resource_templates(self) -> list[dict[str, Any]]:
        return [template.listing for template in self.templates.values()]


__all__ = ["Completer", "Registry"]
