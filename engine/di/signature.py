"""Signature analysis: a handler's own parameters become its arguments model and its resolver plan.

Everything here runs at registration time, so a graph the engine cannot run fails with
:class:`InvalidSignature` before any client connects, naming the function and parameter at fault.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model
from pydantic_core import SchemaValidator

from engine._internal.introspect import flavour, type_hints
from engine.di.annotations import (
    has_nested_resolve,
    is_context_annotation,
    is_redacted,
    named_parameters,
    resolve_marker,
)
from engine.di.input_required import (
    ANSWER_MODELS,
    NO_RETURN,
    AnswerModels,
    answer_models,
    input_required_model,
    without_input_required,
)
from engine.di.plain_arguments import plain_arguments
from engine.di.plan import Plan
from engine.di.planner import Planner
from engine.errors import InvalidSignature
from engine.role import Role


@dataclass(eq=False)
class Signature:
    """What registration learns about a handler: its arguments model and its plan."""

    fn: Callable[..., Any]
    owner: str
    role: Role
    arguments: type[BaseModel]
    argument_names: list[str]
    context_names: list[str]
    is_async: bool
    plan: Plan
    return_type: Any
    """The return annotation of the handler's values, without an ``InputRequiredResult`` arm
    (that is not data: no output schema describes it)."""
    plain_arguments: tuple[tuple[str, type, Any], ...] | None = None
    """``(name, type, default)`` of every argument when all are plain ``str``, ``int``,
    ``float`` or ``bool`` fields without constraints or aliases (``None`` otherwise): a value of
    exactly that type validates to itself, so such arguments skip the model (see
    :func:`engine.calls.arguments.validate_arguments`)."""
    redacted: frozenset[str] = frozenset()
    """Arguments marked ``Redacted()``: never journaled."""
    answer_models: AnswerModels = field(default_factory=lambda: ANSWER_MODELS)
    """What the client's answers to the handler's own input requests are handed over as
    (``ctx.input_responses``): another library's models when its return annotation names that
    library's ``InputRequiredResult``."""

    validator: SchemaValidator = field(init=False, repr=False)
    """The arguments model's validator, called directly on every round."""

    def __post_init__(self) -> None:
        self.validator = self.arguments.__pydantic_validator__  # type: ignore[assignment]


def analyze(
    fn: Callable[..., Any],
    owner: str,
    *,
    role: Role = Role.TOOL,
    overrides: Mapping[Callable[..., Any], Callable[..., Any]] | None = None,
    model_name: str | None = None,
) -> Signature:
    """Classify every parameter of ``fn`` and plan its resolvers."""
    hints = type_hints(fn)
    signature = inspect.signature(fn)
    fields: dict[str, Any] = {}
    argument_names: list[str] = []
    redacted: set[str] = set()
    label = f"{role.capitalize()} {owner!r}"
    for param in named_parameters(signature, label, "are not supported"):
        annotation = hints.get(param.name, Any)
        if is_context_annotation(annotation) or resolve_marker(annotation) is not None:
            continue
        if has_nested_resolve(annotation):
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, default)
        argument_names.append(param.name)
        if is_redacted(annotation):
            redacted.add(param.name)
    planner = Planner(owner, role, set(argument_names), overrides or {})
    sources = [
        planner.source(owner, p.name, hints.get(p.name, Any), is_handler=True)
        for p in signature.parameters.values()
    ]
    arguments = create_model(
        model_name or f"{owner}Arguments",
        __config__=ConfigDict(arbitrary_types_allowed=True),
        **fields,
    )
    is_async, generator = flavour(fn)
    if generator is not None:
        raise InvalidSignature(f"{label} is a generator; only resolvers may use yield")
    plan = planner.plan(sources)
    returned = hints.get("return", NO_RETURN)
    asking = input_required_model(returned)
    if asking is not None and plan.nodes:
        raise InvalidSignature(
            f"{label} combines Resolve(...) parameters with an InputRequiredResult return. A "
            "call asks the client through one channel: let the resolvers ask (Elicit, Sample, "
            "ListRoots), or return the handler's own input requests and read the answers from "
            "ctx.input_responses, not both"
        )
    return Signature(
        fn=fn,
        owner=owner,
        role=role,
        arguments=arguments,
        argument_names=argument_names,
        context_names=[s.name for s in sources if s.kind == "context"],
        is_async=is_async,
        plan=plan,
        return_type=returned if asking is None else without_input_required(returned),
        plain_arguments=plain_arguments(arguments),
        redacted=frozenset(redacted),
        answer_models=answer_models(asking),
    )
