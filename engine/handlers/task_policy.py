"""When a tool call becomes a task: the tool's ``task=`` option, and whether the client can
take one.

A client takes tasks when its request declares the extension in ``_meta`` client capabilities
(there is no session to remember it by). ``task=True`` makes a task whenever the client can
take one, ``task="required"`` always (a client that cannot is told so with -32021), and a
function decides call by call, from the arguments it names.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from engine.errors import MISSING_CLIENT_CAPABILITY, MCPError

EXTENSION = "io.modelcontextprotocol/tasks"
"""The extension's identifier, in client and server capabilities."""

TaskOption = bool | Literal["required"] | Callable[..., bool] | None
"""What ``@mcp.tool(task=...)`` takes."""


def declares_tasks(capabilities: dict[str, Any]) -> bool:
    """Whether a request's client capabilities declare the Tasks extension."""
    extensions = capabilities.get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get(EXTENSION), dict)


def missing_extension(what: str) -> MCPError:
    """-32021 for a request the server cannot serve without the extension."""
    return MCPError(
        MISSING_CLIENT_CAPABILITY,
        f"{what} needs the {EXTENSION} extension: declare it in the request's "
        f"_meta clientCapabilities (extensions: {{{EXTENSION!r}: {{}}}})",
        {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
    )


@dataclass(frozen=True, slots=True)
class TaskPolicy:
    """A tool's ``task=`` option, checked at registration."""

    required: bool = False
    decide: Callable[..., bool] | None = None
    """``task=function``: called with the call's validated arguments that it names."""
    names: frozenset[str] | None = None
    """The arguments ``decide`` takes; ``None``: all of them (it takes ``**kwargs``)."""

    @classmethod
    def of(cls, option: TaskOption, tool: str, arguments: frozenset[str]) -> TaskPolicy | None:
        """The policy of ``task=option`` for ``tool`` (whose arguments are ``arguments``);
        ``None`` for a tool that never runs as a task."""
        if option is None or option is False:
            return None
        if option is True:
            return cls()
        if option == "required":
            return cls(required=True)
        if not callable(option):
            raise ValueError(
                f"tool {tool!r}: task= takes True, 'required', or a function of the tool's "
                f"arguments returning True for a call to run as a task; got {option!r}"
            )
        if inspect.iscoroutinefunction(option):
            raise TypeError(f"tool {tool!r}: task= takes a plain function, not a coroutine")
        parameters = inspect.signature(option).parameters.values()
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
            return cls(decide=option)
        names = frozenset(p.name for p in parameters)
        unknown = sorted(names - arguments)
        if unknown:
            raise ValueError(
                f"tool {tool!r}: the task= function takes {', '.join(unknown)}, which the tool "
                f"does not (it takes {', '.join(sorted(arguments)) or 'no arguments'})"
            )
        return cls(decide=option, names=names)

    def wanted(self, arguments: dict[str, Any]) -> bool:
        """Whether this call, with these validated arguments, runs as a task."""
        decide = self.decide
        if decide is None:
            return True
        names = self.names
        given = arguments if names is None else {k: v for k, v in arguments.items() if k in names}
        return bool(decide(**given))
