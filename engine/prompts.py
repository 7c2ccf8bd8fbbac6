"""``Prompt``: a prompt made from a function without the decorator, to add to a server with
``mcp.add_prompt(prompt)`` (a prompt the server's users save at run time, say), or to render in
process, as a test does.

It is the record ``@mcp.prompt()`` makes, with two additions: :meth:`Prompt.from_function`,
the official SDK's way to make one, and :meth:`Prompt.render`, which runs the prompt once
outside any request and returns its messages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Self

from engine.calls.execute import Outcome, execute_round
from engine.context import DETACHED, Context, server_hooks
from engine.di.overrides import DependencyOverrides
from engine.direct import HandedBack, asks_a_client, direct_scope
from engine.handlers import prompt
from engine.prompt_messages import AssistantMessage, Message, UserMessage
from engine.questions.answers import StatelessAnswers
from engine.scope import ServerHooks
from engine.state.call import CallState
from engine.types import Icon


class Prompt(prompt.Prompt):
    """A prompt: a function, the name and description it is listed with, and its arguments
    (its parameters, each with the ``Field(description=...)`` it is annotated with)."""

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        icons: Sequence[Icon | Mapping[str, Any]] | None = None,
        context_kwarg: str | None = None,
    ) -> Self:
        """The prompt ``@mcp.prompt(name, title=..., description=..., icons=...)`` would
        register for ``fn``; add it with ``mcp.add_prompt(prompt)``.

        The ``Context`` parameter is found by its annotation; ``context_kwarg`` may name it,
        and must then name a parameter annotated ``Context``.
        """
        made = cls(fn, name, title=title, description=description, icons=icons)
        made.check_context_kwarg(context_kwarg)
        return made

    async def render(
        self, arguments: Mapping[str, Any] | None = None, context: Any = None
    ) -> list[Message] | HandedBack:
        """The prompt's messages for ``arguments``, run once in process; or the
        ``InputRequiredResult`` the prompt returned, as it returned it.

        It runs as a ``prompts/get`` would: arguments validated, resolvers run, a plain
        ``def`` in a worker thread. ``context``, a ``Context`` bound to a server, lends that
        server (its lifespan value, resources and dependency overrides); without one the prompt
        runs on its own. Raises ``ValueError`` when the arguments do not fit, when the prompt
        fails (chained to what it raised), or when it asks a question through the engine (a
        resolver, ``ctx.elicit``), which only a client can answer. Without a server, what needs
        one (``ctx.read_resource``, a notification) fails the prompt.
        """
        hooks = _hooks_of(context)
        overrides = getattr(hooks, "dependency_overrides", None)
        if not isinstance(overrides, DependencyOverrides):
            overrides = DependencyOverrides()
        state = CallState()
        scope = direct_scope("prompts/get")
        answers = StatelessAnswers(state, None, scope.capabilities)
        executed = await execute_round(
            self,
            dict(arguments) if arguments is not None else {},
            scope,
            "",
            1,
            state,
            answers,
            hooks=hooks,
            overrides=overrides,
            convert=self.result,
        )
        if executed.outcome is Outcome.FAILED:
            raise ValueError(executed.error) from executed.unexpected or executed.cause
        if executed.outcome is Outcome.HANDLER_ASKED:
            return executed.returned
        if executed.outcome is not Outcome.COMPLETE:
            raise ValueError(asks_a_client(f"Prompt {self.name!r}"))
        return [_message(wire) for wire in executed.value["messages"]]


def _message(wire: dict[str, Any]) -> Message:
    role = wire.get("role")
    kind = AssistantMessage if role == "assistant" else UserMessage
    return kind.model_validate(wire)


def _hooks_of(context: Any) -> ServerHooks:
    """What a ``Context`` reaches of its server; with no context, or one made outside a server,
    a server that has nothing."""
    hooks = server_hooks(context) if isinstance(context, Context) else None
    return DETACHED if hooks is None else hooks


__all__ = ["Prompt"]
