"""The resolver plan a round walks: a node per resolver, and where each parameter gets its value.

Built once at registration (:mod:`engine.di.planner`) and only read afterwards; parameters are
grouped by source up front so a round fills in keyword arguments without deciding anything.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter

ParamKind = Literal["context", "resolved", "argument"]


@dataclass(eq=False)
class Source:
    """Where one parameter of a handler or resolver gets its value."""

    name: str
    kind: ParamKind
    node: Node | None = None
    wants_union: bool = False
    adopt: type[BaseModel] | None = None
    """The model the consumer annotated a resolved parameter with, when it is one another
    library defines (the official ``mcp_types.CreateMessageResult``, say): an answer this engine
    parsed into its own wire model is delivered as that model, by its wire form."""


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
    asker: str = field(init=False, repr=False)
    """Who asks when this resolver asks a question (``resolver 'key'``), as messages name it:
    written once, not on every question."""

    def __post_init__(self) -> None:
        self.parameters = Parameters.of(self.sources)
        self.asker = f"resolver {self.key!r}"

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
