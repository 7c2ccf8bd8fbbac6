"""What a handler's return annotation says about input it asks the client for itself.

A handler may return an ``InputRequiredResult`` (ours, or another library's model of that
shape) instead of its value: its return annotation then names that model, alone or as one arm
of a union. Registration reads three things from it, once: whether it is there at all (a
handler that also has ``Resolve(...)`` parameters is refused), the annotation without that arm
(what the output schema and default MIME type are made from), and the models the client's
answers are handed to the handler as (another library's, when the annotation names one).
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

from engine._internal.introspect import is_union, type_hints
from engine.input_requests import is_input_required_model
from engine.types import (
    CreateMessageResult,
    CreateMessageResultWithTools,
    ElicitResult,
    InputRequiredResult,
    ListRootsResult,
)

NO_RETURN: Any = inspect.Signature.empty

AnswerModels = Mapping[str, tuple[type[BaseModel], ...]]
"""The models an answer to a request of each method is tried as, in order."""

ANSWER_MODELS: AnswerModels = types.MappingProxyType(
    {
        "elicitation/create": (ElicitResult,),
        "sampling/createMessage": (CreateMessageResult, CreateMessageResultWithTools),
        "roots/list": (ListRootsResult,),
    }
)
"""Ours: what the answers are when the annotation names no other library's models."""


def _arms(annotation: Any) -> Iterator[Any]:
    """Every arm of an annotation, through ``Annotated``, ``type`` aliases and unions."""
    if get_origin(annotation) is Annotated:
        yield from _arms(get_args(annotation)[0])
        return
    alias = _alias_value(annotation)
    if alias is not None:
        yield from _arms(alias)
        return
    if is_union(annotation):
        for arm in get_args(annotation):
            yield from _arms(arm)
        return
    yield annotation


def _alias_value(annotation: Any) -> Any:
    """What a ``type X = ...`` alias (or one subscripted) stands for; ``None`` for anything else,
    and for an alias naming what only a type checker sees (it cannot be evaluated)."""
    for candidate in (annotation, get_origin(annotation)):
        if candidate is None or isinstance(candidate, type):
            continue
        try:
            value = getattr(candidate, "__value__", None)
        except NameError:
            return None
        if value is not None:
            return value
    return None


def input_required_model(annotation: Any) -> type[BaseModel] | None:
    """The ``InputRequiredResult`` model a return annotation names, if it names one."""
    for arm in _arms(annotation):
        if is_input_required_model(arm):
            return arm  # type: ignore[no-any-return]
    return None


def returns_input_required(fn: Callable[..., Any]) -> bool:
    """Whether ``fn``'s return annotation says it may return an ``InputRequiredResult``."""
    return input_required_model(type_hints(fn).get("return", NO_RETURN)) is not None


def without_input_required(annotation: Any) -> Any:
    """The return annotation of the handler's values: its ``InputRequiredResult`` arms left
    out (:data:`NO_RETURN` when nothing else is left)."""
    target = annotation
    if get_origin(target) is Annotated:
        target = get_args(target)[0]
    alias = _alias_value(target)
    if alias is not None and input_required_model(alias) is not None:
        target = annotation = alias
    if is_input_required_model(target):
        return NO_RETURN
    if not is_union(target):
        return annotation
    arms = get_args(target)
    kept = tuple(arm for arm in arms if input_required_model(arm) is None)
    if len(kept) == len(arms):
        return annotation
    if not kept:
        return NO_RETURN
    return kept[0] if len(kept) == 1 else Union[kept]  # noqa: UP007 - a union of a tuple


def answer_models(model: type[BaseModel] | None) -> AnswerModels:
    """The models answers are handed over as: ours, or, when the annotation names another
    library's ``InputRequiredResult``, that library's answer models of the same names, taken
    from the module it is defined in (ours for any it lacks). So a handler written against that
    library, checking ``isinstance(answer, ElicitResult)`` with its own class, gets what it
    checks for."""
    if model is None or issubclass(model, InputRequiredResult):
        return ANSWER_MODELS
    module = sys.modules.get(model.__module__)
    adopted: dict[str, tuple[type[BaseModel], ...]] = {}
    for method, ours in ANSWER_MODELS.items():
        theirs = [getattr(module, m.__name__, None) for m in ours]
        kinds = tuple(
            t if isinstance(t, type) and issubclass(t, BaseModel) else m
            for t, m in zip(theirs, ours, strict=True)
        )
        adopted[method] = kinds
    return types.MappingProxyType(adopted)


__all__ = [
    "ANSWER_MODELS",
    "NO_RETURN",
    "AnswerModels",
    "answer_models",
    "input_required_model",
    "returns_input_required",
    "without_input_required",
]
