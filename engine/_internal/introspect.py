"""Reading a callable: its name, its type hints, whether it is async or a generator."""

from __future__ import annotations

import functools
import inspect
import types
import typing
from typing import Any, Literal, Union, get_origin

from engine.errors import InvalidSignature


def callable_name(fn: Any) -> str:
    fn = inspect.unwrap(fn) if not isinstance(fn, functools.partial) else fn.func
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) else type(fn).__name__


def identity_of(fn: Any) -> Any:
    """What makes two resolvers the same one: the function (and, for a method, its object)."""
    if inspect.ismethod(fn):
        return (id(fn.__func__), id(fn.__self__))
    return id(fn)


def call_target(fn: Any) -> Any:
    while isinstance(fn, functools.partial):
        fn = fn.func
    if not inspect.isfunction(fn) and not inspect.ismethod(fn) and callable(fn):
        call = getattr(fn, "__call__", None)  # noqa: B004 - callable objects
        if call is not None:
            return call
    return fn


def flavour(fn: Any) -> tuple[bool, Literal["sync", "async"] | None]:
    """``(is_async, generator kind)`` of a callable, looking through partials and ``__call__``."""
    target = inspect.unwrap(call_target(fn))
    if inspect.isasyncgenfunction(target):
        return True, "async"
    if inspect.isgeneratorfunction(target):
        return False, "sync"
    return inspect.iscoroutinefunction(target), None


def type_hints(fn: Any) -> dict[str, Any]:
    target = call_target(fn)
    try:
        return typing.get_type_hints(target, include_extras=True)
    except Exception as exc:
        raise InvalidSignature(
            f"Cannot read the type hints of {callable_name(fn)!r}: {exc}. Import every name "
            "used in its annotations at module level."
        ) from exc


def is_union(annotation: Any) -> bool:
    """Whether ``annotation`` is a union: ``X | Y``, ``Union[X, Y]`` or ``Optional[X]``."""
    origin = get_origin(annotation)
    return origin is Union or origin is types.UnionType
