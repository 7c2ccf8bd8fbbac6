"""A server's handlers called from Python, not by a client: ``await mcp.call_tool(name, args)``.

Each runs one round through the same runner as a client's request, with no token and no
transport, and answers in models and exceptions rather than on the wire: a tool's failure
raises :class:`~engine.errors.ToolError` instead of becoming an error result. A handler that
asks the client a question cannot finish without one, so its direct call raises too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.calls.reply import CallRequest, ReplyKind, RoundReply
from engine.context import RequestScope
from engine.errors import ToolError
from engine.handlers.results import ReadResourceContents
from engine.operations import Operations
from engine.types import CallToolResult, GetPromptResult

ASKABLE: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
"""The capabilities a direct call's own request declares: every question a handler asks is
let through to end the round, so that it fails as a question no one can answer."""


def direct_scope() -> RequestScope:
    """The request a direct call runs in when it is given none."""
    return RequestScope(capabilities=dict(ASKABLE))


async def call_tool(
    operations: Operations, name: str, arguments: Mapping[str, Any] | None, scope: RequestScope
) -> CallToolResult:
    """The tool's result; ``ToolError`` when the tool is unknown, its arguments do not fit, or it
    fails (chained to what it raised); a protocol error (``MCPError``) as raised."""
    tool = operations.registry.tools.get(name)
    if tool is None:
        raise ToolError(f"Unknown tool: {name}")
    request = CallRequest("tools/call", name, _plain(arguments), None, None, scope)
    reply = await operations.runner.run(tool, request, convert=tool.result)
    if reply.kind is ReplyKind.ERROR:
        raise ToolError(reply.error) from reply.exception
    return CallToolResult.model_validate(_answered(reply, f"Tool {name!r}", ToolError))


async def get_prompt(
    operations: Operations, name: str, arguments: Mapping[str, Any] | None, scope: RequestScope
) -> GetPromptResult:
    """The rendered prompt; ``ValueError`` for an unknown prompt, ``MCPError`` when it fails."""
    prompt = operations.registry.prompts.get(name)
    if prompt is None:
        raise ValueError(f"Unknown prompt: {name}")
    request = CallRequest("prompts/get", name, _plain(arguments), None, None, scope)
    reply = await operations.runner.run(prompt, request, convert=prompt.result)
    return GetPromptResult.model_validate(_answered(reply, f"Prompt {name!r}", ValueError))


async def read_resource(
    operations: Operations, uri: str, scope: RequestScope
) -> list[ReadResourceContents]:
    """The resource's contents, text as ``str`` and blobs as ``bytes``; ``ResourceError`` when
    nothing is at ``uri`` or the read fails."""
    return await operations.read_resource_contents(uri, scope)


def _plain(arguments: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if arguments is None else dict(arguments)


def _answered(reply: RoundReply, what: str, error: type[Exception]) -> Any:
    if reply.kind is not ReplyKind.COMPLETE:
        raise error(
            f"{what} asks the client a question, so it can only be run by a client, not called "
            "directly"
        )
    return reply.value


__all__ = ["call_tool", "direct_scope", "get_prompt", "read_resource"]
