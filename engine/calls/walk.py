"""The resolver walk: every resolver of the plan resolved, then the body called.

A round is a function of (code, arguments, state, answers): nothing about a call lives in a
process between rounds. Each resolver runs at most once per round; resolvers that do not depend
on each other run concurrently. Questions go through an
:class:`~engine.questions.answers.AnswerSource`, so the same walk serves the 2026-07-28 era
(answers carried by the request) and the 2025-11-25 back-channel (answers asked in place).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.to_thread

from engine._internal.markers import Marker
from engine.context import Context
from engine.di.plan import Node, Parameters, Source
from engine.di.signature import Signature
from engine.errors import ToolError
from engine.questions.answers import PENDING, AnswerSource
from engine.questions.kinds import Accepted, Question, is_accepted, is_outcome, is_refusal
from engine.questions.rendering import Rendered
from engine.questions.restore import restore_question
from engine.scope import CallScope, RequestScope, ServerHooks, Suspend
from engine.types import WireModel

SUSPENDED: Any = Marker("SUSPENDED")
"""What a round returns instead of the body's value when it needs answers first."""
DEFERRED: Any = Marker("DEFERRED")
"""What a round returns instead of calling the body when the body is to run later, as a task."""

BeforeBody = Callable[[dict[str, Any]], Awaitable[bool]]
"""Asked once the resolvers are answered, with the validated arguments: whether to leave the
body for later (a task) instead of calling it now."""

log = logging.getLogger("engine.rounds")


def deliver(value: Any, source: Source) -> Any:
    """The value a consumer receives from a resolver, given how it annotated the parameter."""
    if source.wants_union:
        if is_outcome(value):
            return value
        return Accepted(data=value)
    if is_accepted(value):
        return value.data
    if is_refusal(value):
        raise ToolError(
            f"Resolver for parameter {source.name!r} could not resolve: "
            f"elicitation was {value.action}"
        )
    return value


def first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The exception a task group's failure stands for: a real error wins over a suspension."""
    flat: list[BaseException] = []

    def collect(g: BaseExceptionGroup[BaseException]) -> None:
        for exc in g.exceptions:
            if isinstance(exc, BaseExceptionGroup):
                collect(exc)
            else:
                flat.append(exc)

    collect(group)
    for exc in flat:
        if not isinstance(exc, Suspend):
            return exc
    return flat[0] if flat else group


class Round:
    """Executes one round of one handler."""

    def __init__(
        self,
        signature: Signature,
        server: ServerHooks,
        scope: RequestScope,
        call: CallScope,
        asker: AnswerSource,
        before_body: BeforeBody | None = None,
    ) -> None:
        self.signature = signature
        self.before_body = before_body
        self.plan = signature.plan
        self.server = server
        self.scope = scope
        self.call = call
        self.asker = asker
        self.values: dict[Node, Any] = {}
        self.exits: contextlib.AsyncExitStack | None = None
        """Generator resolvers' clean-up, for plans that have any."""
        self._ctx: Context[Any] | None = None

    @property
    def ctx(self) -> Context[Any]:
        """The round's Context, made when a parameter first asks for one."""
        ctx = self._ctx
        if ctx is None:
            ctx = self._ctx = Context(self.server, self.scope, self.call)
        return ctx

    def run(self, arguments: dict[str, Any]) -> Awaitable[Any]:
        """The body's value, or :data:`SUSPENDED` (awaitable: without generator resolvers, the
        walk itself)."""
        self.arguments = arguments
        if not self.plan.has_generators:
            return self._run()
        return self._run_with_exits()

    async def _run_with_exits(self) -> Any:
        self.exits = contextlib.AsyncExitStack()
        async with self.exits:
            return await self._run()

    async def _run(self) -> Any:
        """The walk, then the body: one coroutine for both when the resolvers run one after
        another (most plans), with a plain async resolver's own coroutine awaited here."""
        try:
            plan = self.plan
            if plan.sequential:
                values = self.values
                resolved = True
                for node in plan.nodes:
                    if node.deps and self._blocked(node):
                        value = PENDING
                    elif node.once or node.generator is not None or not node.is_async:
                        value = await self._resolve(node)
                    else:
                        value = await node.fn(**self._kwargs(node.parameters, node))
                        if isinstance(value, Question):
                            rendered = Rendered.of(value)
                            answer = self.asker.answer
                            if answer is None:
                                value = await self._ask(node, rendered)
                            else:  # the answer is in the request: no coroutine to ask it
                                value = answer(node.key, rendered, node.asker)
                    values[node] = value
                    if value is PENDING:
                        resolved = False
                if not resolved:
                    return SUSPENDED
            elif not await self._walk():
                return SUSPENDED
            if self.before_body is not None and await self.before_body(self.arguments):
                return DEFERRED
            kwargs = self._kwargs(self.plan.parameters)
            fn = self.signature.fn
            if self.signature.is_async:
                return await fn(**kwargs)
            return await anyio.to_thread.run_sync(functools.partial(fn, **kwargs))
        except Suspend:
            return SUSPENDED
        except BaseExceptionGroup as group:
            error = first_error(group)
            if isinstance(error, Suspend):
                return SUSPENDED
            raise error from None

    # --- the resolver walk ---------------------------------------------------------------------

    async def _walk(self) -> bool:
        """Resolve every node, those that do not depend on each other at once; False when at
        least one is pending on a question."""
        nodes = self.plan.nodes
        if not nodes:
            return True
        done = {node: anyio.Event() for node in nodes}

        async def settle(node: Node) -> None:
            for dep in node.deps:
                await done[dep].wait()
            try:
                await self._settle(node)
            finally:
                done[node].set()

        async with anyio.create_task_group() as tg:
            for node in nodes:
                tg.start_soon(settle, node)
        values = self.values
        for node in nodes:  # noqa: SIM110 - no generator object on every round
            if values[node] is PENDING:
                return False
        return True

    async def _settle(self, node: Node) -> None:
        self.values[node] = PENDING if self._blocked(node) else await self._resolve(node)

    def _blocked(self, node: Node) -> bool:
        """Whether a resolver this node depends on is waiting for an answer."""
        values = self.values
        for dep in node.deps:  # noqa: SIM110 - no generator object on every resolver call
            if values[dep] is PENDING:
                return True
        return False

    async def _resolve(self, node: Node) -> Any:
        if node.once:
            checkpoint = self.call.state.checkpoints.get(node.key)
            if checkpoint is not None:
                return await self._from_checkpoint(node, checkpoint)
            fence = self.asker.before_once
            if fence is not None:
                await fence(node.key)
        value = await self._call(node)
        if isinstance(value, Question):
            rendered = Rendered.of(value)
            if node.once and rendered.kind.once_keeps:
                await self._checkpoint(node.key, [0, value.kind, rendered.params])
            return await self._ask(node, rendered)
        if node.once:
            await self._checkpoint(node.key, [1, node.adapter.dump_python(value, mode="json")])
        return value

    async def _checkpoint(self, key: str, value: Any) -> None:
        self.call.next_state.checkpoints[key] = value
        kept = self.asker.on_checkpoint
        if kept is not None:
            await kept(key)

    async def _from_checkpoint(self, node: Node, checkpoint: Any) -> Any:
        is_value, *rest = checkpoint
        if is_value:
            return node.adapter.validate_python(rest[0])
        kind, params = rest
        question = restore_question(kind, params, node.form_model)
        return await self._ask(node, Rendered.of(question))

    def _ask(self, node: Node, question: Rendered) -> Awaitable[Any]:
        return self.asker.ask(node.key, question, node.asker)

    def _call(self, node: Node) -> Awaitable[Any]:
        """The resolver's value (awaitable: an async resolver's own coroutine, not a wrapper)."""
        kwargs = self._kwargs(node.parameters, node)
        if node.generator is not None:
            return self._enter(node, kwargs)
        if node.is_async:
            return node.fn(**kwargs)  # type: ignore[no-any-return]
        return anyio.to_thread.run_sync(functools.partial(node.fn, **kwargs))

    async def _enter(self, node: Node, kwargs: dict[str, Any]) -> Any:
        """A generator resolver's value; its clean-up runs when the round ends."""
        assert self.exits is not None, "a plan with generators runs inside its exit stack"
        fn = node.fn
        if node.generator == "async":
            return await self.exits.enter_async_context(
                contextlib.asynccontextmanager(fn)(**kwargs)
            )
        manager = contextlib.contextmanager(fn)(**kwargs)
        value = await anyio.to_thread.run_sync(manager.__enter__)

        async def close(*exc_info: Any) -> bool | None:
            return await anyio.to_thread.run_sync(manager.__exit__, *exc_info)

        self.exits.push_async_exit(close)
        return value

    def _kwargs(self, parameters: Parameters, node: Node | None = None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        arguments = self.arguments
        for name in parameters.arguments:
            kwargs[name] = arguments[name]
        values = self.values
        for source, node_of_value in parameters.resolved:
            value = values[node_of_value]
            if source.wants_union or is_outcome(value):
                value = deliver(value, source)
            adopt = source.adopt
            if adopt is not None and isinstance(value, WireModel):
                value = adopt.model_validate(value.to_wire())
            kwargs[source.name] = value
        for name in parameters.contexts:
            kwargs[name] = self.ctx if node is None else self.ctx.for_resolver(node.key)
        return kwargs


__all__ = ["DEFERRED", "SUSPENDED", "BeforeBody", "Round", "deliver"]
