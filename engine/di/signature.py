"""Signature analysis: from a handler's annotations to the resolver plan a round walks.

Everything here runs at registration time, so a graph the engine cannot run fails with
:class:`InvalidSignature` before any client connects, naming the function and parameter at fault.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, TypeAdapter, create_model
from pydantic.fields import FieldInfo
from pydantic_core import SchemaValidator

from engine._internal.introspect import callable_name, flavour, identity_of, type_hints
from engine.errors import InvalidSignature
from engine.questions.forms import elicitation_schema
from engine.questions.kinds import (
    AcceptedElicitation,
    CancelledElicitation,
    DeclinedElicitation,
    Elicit,
    ElicitationResult,
    Question,
)

ParamKind = Literal["context", "resolved", "argument"]


class Resolve:
    """Marks a parameter as filled by a resolver: ``Annotated[T, Resolve(fn)]``.

    ``once=True`` records the resolver's value in the call's state the round it first completes;
    later rounds (on any replica) reuse it instead of running ``fn`` again. ``key`` names the
    resolver's question on the wire; the default is the function's ``__name__``.
    """

    __slots__ = ("fn", "key", "once")

    def __init__(self, fn: Callable[..., Any], *, once: bool = False, key: str | None = None):
        if not callable(fn):
            raise InvalidSignature(f"Resolve() needs a callable, got {fn!r}")
        if key is not None and (not key or "#" in key):
            raise InvalidSignature(f"Resolve key {key!r} must be non-empty and contain no '#'")
        self.fn = fn
        self.once = once
        self.key = key

    def __repr__(self) -> str:
        return f"Resolve({callable_name(self.fn)}, once={self.once}, key={self.key!r})"


@dataclass(eq=False)
class Source:
    """Where one parameter of a handler or resolver gets its value."""

    name: str
    kind: ParamKind
    node: Node | None = None
    wants_union: bool = False


@dataclass(eq=False)
class Node:
    """One resolver in a handler's plan."""

    fn: Callable[..., Any]
    name: str
    key: str
    once: bool
    sources: list[Source]
    is_async: bool
    generator: Literal["sync", "async"] | None
    value_type: Any
    form_model: type[BaseModel] | None = None
    """The model of the form this resolver asks for, when its annotations say."""
    deps: list[Node] = field(default_factory=list)
    index: int = 0
    parameters: Parameters = field(init=False, repr=False)
    """Read on every round, so set here rather than as a cached property: an attribute added on
    first use slows every later attribute read of the object."""

    def __post_init__(self) -> None:
        self.parameters = Parameters.of(self.sources)

    @functools.cached_property
    def adapter(self) -> TypeAdapter[Any]:
        return TypeAdapter(self.value_type)


@dataclass(frozen=True, slots=True)
class Parameters:
    """A consumer's parameters grouped by where their values come from: grouped once, so a
    round fills in keyword arguments without testing each parameter's kind."""

    arguments: tuple[str, ...]
    resolved: tuple[tuple[Source, Node], ...]
    contexts: tuple[str, ...]

    @classmethod
    def of(cls, sources: list[Source]) -> Parameters:
        return cls(
            tuple(s.name for s in sources if s.kind == "argument"),
            tuple((s, s.node) for s in sources if s.kind == "resolved" and s.node is not None),
            tuple(s.name for s in sources if s.kind == "context"),
        )


@dataclass(eq=False)
class Plan:
    """The resolvers of one handler in dependency order, and how the handler is called."""

    nodes: list[Node]
    sources: list[Source]
    sequential: bool
    parameters: Parameters = field(init=False, repr=False)
    """The handler's own parameters, grouped."""
    has_generators: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.parameters = Parameters.of(self.sources)
        self.has_generators = any(node.generator is not None for node in self.nodes)

    @property
    def keys(self) -> set[str]:
        return {n.key for n in self.nodes}


def is_context_annotation(annotation: Any) -> bool:
    from engine.context import Context

    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    candidates = _union_members(annotation)
    for candidate in candidates:
        origin = get_origin(candidate) or candidate
        if isinstance(origin, type) and issubclass(origin, Context):
            return True
    return False


def _union_members(annotation: Any) -> tuple[Any, ...]:
    if isinstance(annotation, typing.TypeAliasType if hasattr(typing, "TypeAliasType") else ()):
        annotation = annotation.__value__
    origin = get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        return get_args(annotation)
    return (annotation,)


def _resolve_marker(annotation: Any) -> tuple[Any, Resolve] | None:
    if get_origin(annotation) is not Annotated:
        return None
    inner, *metadata = get_args(annotation)
    for item in metadata:
        if isinstance(item, Resolve):
            return inner, item
    return None


def _has_nested_resolve(annotation: Any) -> bool:
    return any(_resolve_marker(member) is not None for member in _union_members(annotation))


_OUTCOMES = (AcceptedElicitation, DeclinedElicitation, CancelledElicitation)


def wants_union(annotation: Any) -> bool:
    """Whether a consumer asked for the whole accept/decline/cancel outcome."""
    origin = get_origin(annotation)
    if annotation is ElicitationResult or origin is ElicitationResult:
        return True
    for member in _union_members(annotation):
        base = getattr(member, "__pydantic_generic_metadata__", {}).get("origin") or member
        base = get_origin(base) or base
        if isinstance(base, type) and issubclass(base, _OUTCOMES):
            return True
    return False


def _question_arms(annotation: Any) -> tuple[list[Any], list[Any]]:
    """Split a return annotation into (question arms, value arms)."""
    questions: list[Any] = []
    values: list[Any] = []
    for member in _union_members(annotation):
        base = get_origin(member) or member
        if isinstance(base, type) and issubclass(base, Question):
            questions.append(member)
        else:
            values.append(member)
    return questions, values


def _yielded_type(annotation: Any) -> Any:
    origin = get_origin(annotation)
    args = get_args(annotation)
    if (
        origin is not None
        and args
        and getattr(origin, "__name__", "")
        in {
            "Iterator",
            "Generator",
            "AsyncIterator",
            "AsyncGenerator",
            "Iterable",
            "AsyncIterable",
        }
    ):
        return args[0]
    return Any


class Planner:
    """Builds the plan of one handler; ``overrides`` swaps resolvers (tests)."""

    def __init__(
        self,
        owner: str,
        role: str,
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

    def source(self, fn_label: str, name: str, annotation: Any, *, is_handler: bool) -> Source:
        if is_context_annotation(annotation):
            return Source(name, "context")
        marker = _resolve_marker(annotation)
        if marker is not None:
            consumer_type, resolve = marker
            node = self.node(resolve, consumer_type)
            return Source(name, "resolved", node, wants_union(consumer_type))
        if _has_nested_resolve(annotation):
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
        signature = inspect.signature(fn)
        sources: list[Source] = []
        for param in signature.parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise InvalidSignature(
                    f"Resolver {name!r} parameter {param.name!r}: *args and **kwargs cannot be "
                    "resolved; name each parameter"
                )
            annotation = hints.get(param.name, Any)
            sources.append(self.source(name, param.name, annotation, is_handler=False))
        is_async, generator = flavour(fn)
        returns = hints.get("return", Any)
        if generator is not None:
            returns = _yielded_type(returns)
        arms, values = _question_arms(returns)
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


def _form_model(name: str, arms: list[Any], value_type: Any) -> type[BaseModel] | None:
    """The form model an ``Elicit[X]`` arm (or an ``ElicitationResult[X]`` consumer) names.

    A model that cannot be shown as a form fails here, at registration.
    """
    elicits = [arm for arm in arms if (get_origin(arm) or arm) is Elicit]
    candidates = [get_args(arm)[0] for arm in elicits if get_args(arm)]
    if not candidates:
        origin = get_origin(value_type)
        if origin is ElicitationResult or value_type is ElicitationResult:
            candidates = list(get_args(value_type)[:1])
        else:
            candidates = [value_type]
    model = candidates[0] if candidates else None
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return None
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


def _unique(nodes: Any) -> list[Node]:
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


@dataclass(eq=False)
class Signature:
    """What registration learns about a handler: its arguments model and its plan."""

    fn: Callable[..., Any]
    owner: str
    role: str
    arguments: type[BaseModel]
    argument_names: list[str]
    context_names: list[str]
    is_async: bool
    plan: Plan
    return_type: Any
    plain_arguments: tuple[tuple[str, type, Any], ...] | None = None
    """``(name, type, default)`` of every argument when all are plain ``str``, ``int``,
    ``float`` or ``bool`` fields without constraints or aliases (``None`` otherwise): a value of
    exactly that type validates to itself, so such arguments skip the model (see
    :func:`engine.calls.walk.validate_arguments`)."""

    validator: SchemaValidator = field(init=False, repr=False)
    """The arguments model's validator, called directly on every round."""

    def __post_init__(self) -> None:
        self.validator = self.arguments.__pydantic_validator__  # type: ignore[assignment]


def analyze(
    fn: Callable[..., Any],
    owner: str,
    *,
    role: str = "tool",
    overrides: Mapping[Callable[..., Any], Callable[..., Any]] | None = None,
    model_name: str | None = None,
) -> Signature:
    """Classify every parameter of ``fn`` and plan its resolvers."""
    hints = type_hints(fn)
    signature = inspect.signature(fn)
    fields: dict[str, Any] = {}
    argument_names: list[str] = []
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise InvalidSignature(
                f"{role.capitalize()} {owner!r} parameter {param.name!r}: *args and **kwargs "
                "are not supported; name each parameter"
            )
        annotation = hints.get(param.name, Any)
        if is_context_annotation(annotation) or _resolve_marker(annotation) is not None:
            continue
        if _has_nested_resolve(annotation):
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        if isinstance(default, FieldInfo):
            fields[param.name] = (annotation, default)
        else:
            fields[param.name] = (annotation, default)
        argument_names.append(param.name)
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
        raise InvalidSignature(
            f"{role.capitalize()} {owner!r} is a generator; only resolvers may use yield"
        )
    return Signature(
        fn=fn,
        owner=owner,
        role=role,
        arguments=arguments,
        argument_names=argument_names,
        context_names=[s.name for s in sources if s.kind == "context"],
        is_async=is_async,
        plan=Plan(planner.order, sources, _sequential(planner.order)),
        return_type=hints.get("return", inspect.Signature.empty),
        plain_arguments=_plain_arguments(arguments),
    )


REQUIRED: Any = object()
"""The default of a plain argument that has none."""
_PLAIN_TYPES: dict[type, type] = {kind: kind for kind in (str, int, float, bool)}
_PLAIN_DEFAULTS = (str, int, float, bool, type(None))


def _plain_arguments(model: type[BaseModel]) -> tuple[tuple[str, type, Any], ...] | None:
    """See :attr:`Signature.plain_arguments` (``model`` is built by :func:`analyze`: fields
    only, no validators, extra keys ignored)."""
    arguments: list[tuple[str, type, Any]] = []
    for name, info in model.model_fields.items():
        required = info.is_required()
        default = None if required else info.default
        annotation = info.annotation
        kind = _PLAIN_TYPES.get(annotation) if isinstance(annotation, type) else None
        if (
            kind is None
            or info.metadata
            or info.alias is not None
            or info.validation_alias is not None
            or info.default_factory is not None
            or info.validate_default
            or not isinstance(default, _PLAIN_DEFAULTS)
        ):
            return None
        arguments.append((name, kind, REQUIRED if required else default))
    return tuple(arguments)
