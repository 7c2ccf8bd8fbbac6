"""The operations behind ``tools/call``, ``prompts/get`` and ``resources/read``: find the
handler in the registry, run its round with a runner.

One registry and one runner make one set of operations: the live server's runner claims and
journals; a replay's runner has no store, so the same operations touch nothing outside.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable

from engine._internal.metrics import Metrics
from engine.calls.execute import Convert
from engine.calls.reply import CallRequest, ReplyKind, RoundReply
from engine.calls.runner import RoundRunner
from engine.errors import (
    INVALID_PARAMS,
    MCPError,
    ResourceError,
    ResourceNotFoundError,
    UnexpectedResourceError,
)
from engine.handlers.base import Handler
from engine.handlers.prompt import Prompt
from engine.handlers.resource import Resource
from engine.handlers.results import ReadResourceContents, contents_for_server
from engine.handlers.tool import Tool
from engine.protocol.errors import store_error
from engine.questions.answers import AnswerSource
from engine.registry import Registry
from engine.scope import RequestScope
from engine.tasks.service import Tasks, task_start
from stores.base import StoreUnavailable


def converter(handler: Handler, target: str) -> Convert:
    """How ``handler``'s value becomes its method's wire result; ``target`` is the URI read,
    for a resource."""
    if isinstance(handler, Tool | Prompt):
        return handler.result
    if not isinstance(handler, Resource):  # pragma: no cover - every handler is one of the three
        raise TypeError(f"no wire result for a {handler.role}")
    return functools.partial(handler.contents, target)


class Operations:
    """The round operations of one registry, run by one runner."""

    def __init__(
        self,
        registry: Registry,
        runner: RoundRunner,
        metrics: Metrics,
        tasks: Tasks | None = None,
    ) -> None:
        self.registry = registry
        self.runner = runner
        self.metrics = metrics
        self.tasks = tasks
        """Where a tool call whose tool runs as a task becomes one (``None``: no store)."""

    def call_tool(
        self, request: CallRequest, in_place: AnswerSource | None = None
    ) -> Awaitable[RoundReply]:
        """One round of a tool call (awaitable; a plain function so that a round is one
        coroutine less deep). ``in_place`` answers questions within the round (2025-11-25)."""
        tool = self.registry.tools.get(request.target)
        if tool is None:
            return _replied(RoundReply(ReplyKind.ERROR, error=f"Unknown tool: {request.target}"))
        task = None if tool.task is None else task_start(self.tasks, tool, request, in_place)
        return self.runner.run(tool, request, in_place=in_place, convert=tool.result, task=task)

    async def get_prompt(
        self, request: CallRequest, in_place: AnswerSource | None = None
    ) -> RoundReply:
        prompt = self.registry.prompts.get(request.target)
        if prompt is None:
            raise MCPError(
                INVALID_PARAMS, f"Unknown prompt: {request.target}", {"name": request.target}
            )
        return await self.runner.run(prompt, request, in_place=in_place, convert=prompt.result)

    async def read_resource(
        self, request: CallRequest, in_place: AnswerSource | None = None
    ) -> RoundReply:
        uri = request.target
        found = self.registry.find_resource(uri)
        if found is None:
            raise MCPError(INVALID_PARAMS, f"Unknown resource: {uri}", {"uri": uri})
        resource, params = found
        request.arguments = params
        return await self.runner.run(
            resource, request, in_place=in_place, convert=converter(resource, uri)
        )

    async def read_resource_contents(
        self, uri: str, scope: RequestScope
    ) -> list[ReadResourceContents]:
        """``ctx.read_resource``: the same registry as ``resources/read``, from inside a handler.
        Only contents: a resource that asks the client a question raises."""
        request = CallRequest("resources/read", uri, None, None, None, scope)
        reply = await self.read_resource_in_process(request)
        if reply.kind is ReplyKind.INPUT_REQUIRED and reply.value is not None:
            raise RuntimeError(
                "Resource returned InputRequiredResult; ctx.read_resource() only returns "
                "content — use MCPServer.read_resource(uri, context) to receive and forward it."
            )
        if reply.kind is not ReplyKind.COMPLETE:
            raise ResourceError(
                f"Resource {uri!r} asks the client a question, so it can only be read by a "
                "client, not from inside a handler"
            )
        return contents_for_server(reply.value["contents"])

    async def read_resource_in_process(self, request: CallRequest) -> RoundReply:
        """A read from Python rather than from a client: its failures raised as the resource
        errors a handler catches (``UnexpectedResourceError`` chained to what a crashing
        resource raised)."""
        try:
            return await self.read_resource(request)
        except MCPError as exc:
            if exc.__cause__ is not None:  # the resource crashed: what it raised is the cause
                raise UnexpectedResourceError(exc.message) from exc.__cause__
            unknown = exc.code == INVALID_PARAMS
            raise (ResourceNotFoundError if unknown else ResourceError)(exc.message) from None
        except StoreUnavailable as exc:  # what a client would get, as the handler's error
            raise ResourceError(store_error(exc, self.metrics).message) from None


async def _replied(reply: RoundReply) -> RoundReply:
    return reply


__all__ = ["Operations", "converter"]
