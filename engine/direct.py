"""A server's handlers called from Python, not by a client: ``await mcp.call_tool(name, args)``.

Each runs one round through the same runner as a client's request, with no token and no
transport, and answers in models and exceptions rather than on the wire: a tool's failure
raises :class:`~engine.errors.ToolError` instead of becoming an error result. A handler that
returns its own input requests has them handed back, for a caller that forwards them; one that
asks through the engine (a resolver, ``ctx.elicit``) cannot finish without a client, so its
direct call raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.calls.reply import CallRequest, ReplyKind, RoundReply
from engine.context import Context, forwarded_input, request_scope
from engine.errors import ResourceError, ToolError, UnexpectedToolError
from engine.handlers.results import ReadResourceContents, contents_for_server
from engine.operations import Operations
from engine.questions.kinds import declared_capabilities
from engine.scope import RequestScope
from engine.types import CallToolResult, GetPromptResult


def direct_scope(method: str = "") -> RequestScope:
    """The request a direct call (or a prompt's render) runs in when it is given none. It
    declares every kind of question: each question a handler asks is let through to end the
    round, so that it fails as a question no one can answer."""
    return RequestScope(method=method, capabilities=declared_capabilities())


def asks_a_client(what: str) -> str:
    """The error of a direct call whose handler asks a question through the engine."""
    return (
        f"{what} asks the client a question, which only a client can answer: call it through "
        "one (engine.testing.Client in a test), or replace what asks with "
        "mcp.dependency_overrides[resolver] = a function that returns the answer"
    )


def direct_request(
    method: str, target: str, arguments: Mapping[str, Any] | None, context: Context[Any] | None
) -> CallRequest:
    """The request of a direct call: in ``context``'s request, when given, with the answers to
    the input requests its handler returned (so that a handler forwarding what a direct call
    handed back gets the answers to it); else in a request of its own."""
    plain = None if arguments is None else dict(arguments)
    if context is None:
        return CallRequest(method, target, plain, None, None, direct_scope())
    forwarded = forwarded_input(context)
    if forwarded is None:
        return CallRequest(method, target, plain, None, None, request_scope(context))
    asked, answers = forwarded
    return CallRequest(method, target, plain, answers, None, request_scope(context), asked)


HandedBack = Any
"""The ``InputRequiredResult`` a handler returned, as it returned it (this package's, another
library's model, or a dict of its wire form): a direct call hands it back for the caller to
return as its own result."""


async def call_tool(
    operations: Operations,
    name: str,
    arguments: Mapping[str, Any] | None,
    context: Context[Any] | None,
) -> CallToolResult | HandedBack:
    """The tool's result, or the input requests it returned. ``ToolError`` when the tool is
    unknown, its arguments do not fit (chained to the ``ValidationError``), or it raised one;
    ``UnexpectedToolError`` when it failed otherwise (chained to what it raised); a protocol
    error (``MCPError``) as raised."""
    tool = operations.registry.tools.get(name)
    if tool is None:
        raise ToolError(f"Unknown tool: {name}")
    request = direct_request("tools/call", name, arguments, context)
    reply = await operations.runner.run(tool, request, convert=tool.result)
    if reply.kind is ReplyKind.ERROR:
        if reply.exception is not None:
            raise UnexpectedToolError(reply.error) from reply.exception
        raise ToolError(reply.error) from reply.cause
    answered = _answered(reply, f"Tool {name!r}", ToolError)
    if reply.kind is ReplyKind.COMPLETE:
        return CallToolResult.model_validate(answered)
    return answered


async def get_prompt(
    operations: Operations,
    name: str,
    arguments: Mapping[str, Any] | None,
    context: Context[Any] | None,
) -> GetPromptResult | HandedBack:
    """The rendered prompt, or the input requests it returned; ``ValueError`` for an unknown
    prompt, ``MCPError`` when it fails."""
    prompt = operations.registry.prompts.get(name)
    if prompt is None:
        raise ValueError(f"Unknown prompt: {name}")
    request = direct_request("prompts/get", name, arguments, context)
    reply = await operations.runner.run(prompt, request, convert=prompt.result)
    answered = _answered(reply, f"Prompt {name!r}", ValueError)
    return (
        GetPromptResult.model_validate(answered) if reply.kind is ReplyKind.COMPLETE else answered
    )


async def read_resource(
    operations: Operations, uri: str, context: Context[Any] | None
) -> list[ReadResourceContents] | HandedBack:
    """The resource's contents, text as ``str`` and blobs as ``bytes``, or the input requests
    it returned; ``ResourceError`` when nothing is at ``uri`` or the read fails
    (``UnexpectedResourceError``, chained to what it raised, when it crashed)."""
    request = direct_request("resources/read", uri, None, context)
    reply = await operations.read_resource_in_process(request)
    answered = _answered(reply, f"Resource {uri!r}", ResourceError)
    if reply.kind is ReplyKind.COMPLETE:
        return contents_for_server(answered["contents"])
    return answered


def _answered(reply: RoundReply, what: str, error: type[Exception]) -> Any:
    """The completed result, or the input requests the handler returned; a question asked
    through the engine (a resolver, ``ctx.elicit``) raises ``error``: only a client answers it."""
    if reply.kind is ReplyKind.INPUT_REQUIRED and reply.value is not None:
        return reply.value
    if reply.kind is not ReplyKind.COMPLETE:
        raise error(asks_a_client(what))
    return reply.value


__all__ = [
    "HandedBack",
    "asks_a_client",
    "call_tool",
    "direct_scope",
    "get_prompt",
    "read_resource",
]
