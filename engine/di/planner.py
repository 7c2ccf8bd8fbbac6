"""The planner: from a handler's ``Resolve`` markers to every resolver, checked and in dependency
order, as the :class:`~engine.di.plan.Plan` a round walks.

Every rule a resolver graph must follow fails here, at registration, naming the offender.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

from engine import types as wire
from engine._internal.introspect import callable_name, flavour, identity_of, type_hints
from engine.di.annotations import (
    has_nested_resolve,
    is_context_annotation,
    named_parameters,
    question_arms,
    resolve_marker,
    wants_union,
    yielded_type,
)
from engine.di.plan import Node, Plan, Source
from engine.di.resolve import Resolve
from engine.errors import InvalidSignature
from engine.questions.forms import elicitation_schema
from engine.questions.kinds import Elicit, ElicitationResult
from engine.role import Role


class Planner:
    """Builds the plan of one handler; ``overrides`` swaps resolvers (tests)."""

    def __init__(
        self,
        owner: str,
        role: Role,
        argument_names: set[str],
        overrides: Mapping[Callable[..., Any], Callable[..., Any]],
    ) -> None:
        self.owner = owner
        self.role = role
        self.argument_names = argument_names
        self.overrides = overrides
        self.nodes: dict[Any, Node] = {}
        self.order: list[Node] = []
        self.stack: list[Any] = []
        self.keys: dict[str, Node] = {}

    def plan(self, sources: list[Source]) -> Plan:
        """The plan of a handler whose own parameters are ``sources`` (each built by
        :meth:`source`, which planned the resolvers they reach)."""
        return Plan(self.order, sources, _sequential(self.order))

    def source(self, fn_label: str, name: str, annotation: Any, *, is_handler: bool) -> Source:
        if is_context_annotation(annotation):
            return Source(name, "context")
        marker = resolve_marker(annotation)
        if marker is not None:
            consumer_type, resolve = marker
            node = self.node(resolve, consumer_type)
            union = wants_union(consumer_type)
            return Source(
                name, "resolved", node, union, None if union else foreign_model(consumer_type)
            )
        if has_nested_resolve(annotation):
            raise InvalidSignature(
                f"Parameter {name!r} of {fn_label!r} wraps `Resolve(...)` in a union; annotate "
                "the parameter directly as `Annotated[T, Resolve(...)]`"
            )
        if is_handler or name in self.argument_names:
            return Source(name, "argument")
        raise InvalidSignature(
            f"Resolver {fn_label!r} parameter {name!r} cannot be resolved: expected a Context, "
            f"an Annotated[_, Resolve(...)], or a {self.role} argument by name "
            f"(in {self.role} {self.owner!r})"
        )

    def node(self, resolve: Resolve, consumer_type: Any) -> Node:
        identity = identity_of(resolve.fn)
        existing = self.nodes.get(identity)
        if existing is not None:
            if existing.once != resolve.once or (resolve.key and resolve.key != existing.key):
                raise InvalidSignature(
                    f"Resolver {existing.name!r} is used with different Resolve(...) options in "
                    f"{self.role} {self.owner!r}; give every use the same once= and key="
                )
            return existing
        name = callable_name(resolve.fn)
        if identity in self.stack:
            raise InvalidSignature(f"Resolver {name!r} has a cyclic dependency")
        self.stack.append(identity)
        fn = self.overrides.get(resolve.fn, resolve.fn)
        hints = type_hints(fn)
        sources = [
            self.source(name, param.name, hints.get(param.name, Any), is_handler=False)
            for param in named_parameters(
                inspect.signature(fn), f"Resolver {name!r}", "cannot be resolved"
            )
        ]
        is_async, generator = flavour(fn)
        returns = hints.get("return", Any)
        if generator is not None:
            returns = yielded_type(returns)
        arms, values = question_arms(returns)
        if len(arms) > 1:
            raise InvalidSignature(
                f"Resolver {name!r} return annotation has multiple Elicit/Sample/ListRoots arms; "
                "a resolver asks one question - split it into separate resolvers"
            )
        value_type = _value_type(values, consumer_type)
        form_model = _form_model(name, arms, value_type)
        node = Node(
            fn=fn,
            name=name,
            key=self._key(resolve, name),
            once=resolve.once,
            sources=sources,
            is_async=is_async,
            generator=generator,
            value_type=value_type,
            form_model=form_model,
        )
        node.deps = _unique(s.node for s in sources if s.node is not None)
        self.stack.pop()
        self.nodes[identity] = node
        node.index = len(self.order)
        self.order.append(node)
        return node

    def _key(self, resolve: Resolve, name: str) -> str:
        if resolve.key is not None:
            if resolve.key in self.keys:
                raise InvalidSignature(
                    f"Two resolvers of {self.role} {self.owner!r} use the key {resolve.key!r}"
                )
            key = resolve.key
        else:
            key, n = name, 1
            while key in self.keys:
                n += 1
                key = f"{name}_{n}"
        self.keys[key] = None  # type: ignore[assignment]
        return key


def foreign_model(annotation: Any) -> type[BaseModel] | None:
    """``annotation`` when it is another library's model of one of this engine's wire models
    (of the same name: ``mcp_types.CreateMessageResult``): the only models an answer may need
    to be delivered as. Any other annotation costs the round nothing."""
    if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return None
    if annotation.__module__.startswith("engine."):
        return None
    ours = getattr(wire, annotation.__name__, None)
    return annotation if isinstance(ours, type) and issubclass(ours, wire.WireModel) else None


def _form_model(name: str, arms: list[Any], value_type: Any) -> type[BaseModel] | None:
    """The form model an ``Elicit[X]`` arm (or an ``ElicitationResult[X]`` consumer) names.

    A model that cannot be shown as a form fails here, at registration.
    """
    elicits = [arm for arm in arms if (get_origin(arm) or arm) is Elicit]
    candidates = [get_args(arm)[0] for arm in elicits if get_args(arm)]
    for asked in candidates:
        if not (isinstance(asked, type) and issubclass(asked, BaseModel)):
            raise InvalidSignature(
                f"Resolver {name!r} returns Elicit[{getattr(asked, '__name__', asked)!s}]: a "
                "form is a pydantic model; declare one (class Form(BaseModel): ...) and return "
                "Elicit[Form]"
            )
    if not candidates:
        origin = get_origin(value_type)
        if origin is ElicitationResult or value_type is ElicitationResult:
            candidates = list(get_args(value_type)[:1])
        else:
            candidates = [value_type]
    model = candidates[0] if candidates else None
    if not (isinstance(model, type) and issubclass(model, BaseModel)) or model is BaseModel:
        return None  # Elicit[BaseModel]: a form made at run time (create_model), checked then
    if elicits:
        try:
            elicitation_schema(model)
        except TypeError as exc:
            raise InvalidSignature(f"Resolver {name!r} asks for {model.__name__}: {exc}") from None
    return model


def _value_type(values: list[Any], consumer_type: Any) -> Any:
    if not values or values == [Any]:
        return consumer_type
    if len(values) == 1:
        return values[0]
    return Union[tuple(values)]  # noqa: UP007 - built at runtime


def _unique(nodes: Iterable[Node]) -> list[Node]:
    seen: list[Node] = []
    for node in nodes:
        if node not in seen:
            seen.append(node)
    return seen


def _sequential(nodes: list[Node]) -> bool:
    """True when no two resolvers could ever run at the same time (a chain)."""
    depth: dict[Node, int] = {}
    for node in nodes:
        depth[node] = 1 + max((depth[d] for d in node.deps), default=0)
    levels = list(depth.values())
    return len(levels) == len(set(levels))
