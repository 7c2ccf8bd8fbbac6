"""What every handler is: a user function with its name, role and signature, re-planned under
dependency overrides, and a fingerprint of its code for the journal."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypedDict

from engine._internal.introspect import callable_name
from engine._internal.keywords import refuse_unknown
from engine.auth.settings import check_scope
from engine.di.signature import Signature, analyze
from engine.handlers.code_fingerprint import code_digest
from engine.role import Role
from engine.types import Icon

Overrides = Mapping[Callable[..., Any], Callable[..., Any]]


class HandlerOptions(TypedDict, total=False):
    """What any handler may be given when it is registered, besides its name; each kind
    declares its own on top (:class:`~engine.handlers.tool.ToolOptions`), so every option is
    declared once."""

    title: str | None
    description: str | None
    """The function's docstring when not given."""
    icons: Sequence[Icon | Mapping[str, Any]] | None
    scopes: Sequence[str] | None
    """OAuth scopes a caller's access token needs, on top of the server's ``required_scopes``:
    over HTTP with ``auth``, a call without them gets 403 ``insufficient_scope``."""


def description_of(fn: Callable[..., Any], given: str | None) -> str:
    """The listed description: the one given, otherwise the function's docstring."""
    if given is not None:
        return given
    return inspect.cleandoc(fn.__doc__) if fn.__doc__ else ""


class Handler:
    """A user function plus its registration-time analysis.

    Each kind (:class:`~engine.handlers.tool.Tool` and the others) adds its listing and how a
    returned value becomes the result of its method.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        role: Role,
        name: str | None,
        options: HandlerOptions,
        known: frozenset[str],
    ) -> None:
        """Analyse ``fn`` as a ``role``, listed and called by ``name`` (the function's name when
        not given); ``known`` names the options its kind takes."""
        refuse_unknown(f"{type(self).__qualname__}.__init__", options, known)
        self.fn = fn
        self.name: str = name or callable_name(fn)
        if self.name == "<lambda>":
            raise ValueError("You must provide a name for lambda functions")
        self.role = role
        given_scopes = options.get("scopes") or ()
        if isinstance(given_scopes, str):
            raise TypeError(f"scopes must be a list of scopes, such as [{given_scopes!r}]")
        self.scopes: tuple[str, ...] = tuple(check_scope(scope) for scope in given_scopes)
        self.signature = analyze(fn, self.name, role=role)
        self.plans: dict[int, Signature] = {}
        self.code_fingerprint = code_digest(self.functions(self.signature))
        """Changes when the code of the handler or any of its resolvers changes (set when
        registered: every journaled round reads it)."""

    def check_context_kwarg(self, context_kwarg: str | None) -> None:
        """``from_function(context_kwarg=...)`` of the official API: the ``Context`` parameter is
        found by its annotation here, so a name given must be one of those parameters."""
        if context_kwarg is not None and context_kwarg not in self.signature.context_names:
            raise TypeError(
                f"context_kwarg={context_kwarg!r}: {self.role} {self.name!r} has no parameter of "
                "that name annotated Context; annotate the parameter that receives it as Context"
            )

    def functions(self, signature: Signature) -> list[Callable[..., Any]]:
        """The handler and the resolvers ``signature`` runs, in order: the code a fingerprint
        covers."""
        return [self.fn, *(node.fn for node in signature.plan.nodes)]

    def planned(self, overrides: Overrides, version: int) -> Signature:
        """The signature planned with the current dependency overrides (cached per version)."""
        if not overrides:
            return self.signature
        cached = self.plans.get(version)
        if cached is None:
            cached = analyze(
                self.fn,
                self.name,
                role=self.role,
                overrides=overrides,
                model_name=self.signature.arguments.__name__,
            )
            self.plans = {version: cached}
        return cached
