"""``@mcp.completion()``: the one function that suggests values for prompt and template
arguments, called in the form its signature asks for.

Two forms are served. The official one: ``(ref, argument, context)`` arrive as models and the
function returns a ``Completion`` (or ``None``). Parameters annotated with pydantic models get
those very models, validated from the request by shape (so ``isinstance(ref,
PromptReference)`` holds for the official ``mcp_types`` classes too); unannotated ones get this
package's models (:mod:`engine.types`). The older form of this package: parameters annotated as
dicts get the request's dicts, and the function may return a plain list of strings.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from typing import Any, get_args

from pydantic import BaseModel, TypeAdapter, ValidationError

from engine._internal.introspect import is_union, type_hints
from engine.calls.arguments import summarize
from engine.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MCPError,
    protocol_error_of,
)
from engine.types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceTemplateReference,
)

log = logging.getLogger("engine.completions")

MAX_VALUES = 100
"""The most values one ``completion/complete`` result carries (the protocol's limit)."""


def no_completer() -> MCPError:
    """What ``completion/complete`` gets from a server without ``@mcp.completion()``."""
    return MCPError(METHOD_NOT_FOUND, "Method not found", "completion/complete")


_DEFAULTS: tuple[Any, Any, Any] = (
    PromptReference | ResourceTemplateReference,
    CompletionArgument,
    CompletionContext | None,
)
"""What an unannotated parameter receives, by position."""


class Completer:
    """A completion function and how each of its three parameters is to be given."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        hints = type_hints(fn)
        parameters = list(inspect.signature(fn).parameters.values())[:3]
        if len(parameters) < 3:
            raise TypeError(
                f"A completion function takes (ref, argument, context); "
                f"{getattr(fn, '__name__', fn)!r} takes {len(parameters)} parameter(s)"
            )
        annotations = [hints.get(p.name, inspect.Parameter.empty) for p in parameters]
        self.as_models = any(_names_models(a) for a in annotations)
        """Whether the function is in the official form, so must return a ``Completion``."""
        self.adapters: list[TypeAdapter[Any] | None] = [
            _adapter(annotation, default)
            for annotation, default in zip(annotations, _DEFAULTS, strict=True)
        ]

    async def complete(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The wire ``completion`` for the ``completion/complete`` request ``params``."""
        raw = (params.get("ref"), params.get("argument"), params.get("context"))
        if not isinstance(raw[0], dict) or not isinstance(raw[1], dict):
            raise MCPError(INVALID_PARAMS, "Invalid params: 'ref' and 'argument' are required")
        given: list[Any] = []
        for field, value, adapter in zip(_PARAMS, raw, self.adapters, strict=True):
            try:
                given.append(
                    value if adapter is None or value is None else adapter.validate_python(value)
                )
            except ValidationError as exc:
                problem = summarize(exc)
                raise MCPError(INVALID_PARAMS, f"Invalid params: {field}: {problem}") from None
        name = raw[1].get("name")
        try:
            value = self.fn(*given)
            if inspect.isawaitable(value):
                value = await value
            return self._completion(value)
        except MCPError:
            raise
        except Exception as exc:
            foreign = protocol_error_of(exc)
            if foreign is not None:
                raise foreign from exc
            log.error(
                "Completion for argument %r raised an unexpected exception", name, exc_info=exc
            )
            raise MCPError(INTERNAL_ERROR, f"Error completing argument {name}") from exc

    def _completion(self, value: Any) -> dict[str, Any]:
        if value is None:
            return {"values": []}
        if isinstance(value, list | tuple) and not self.as_models:
            values = [str(v) for v in value]
            return {
                "values": values[:MAX_VALUES],
                "total": len(values),
                "hasMore": len(values) > MAX_VALUES,
            }
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json", by_alias=True, exclude_none=True)
        return Completion.model_validate(value).to_wire()


def _names_models(annotation: Any) -> bool:
    """Whether ``annotation`` is a pydantic model, or a union with one."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return is_union(annotation) and any(_names_models(a) for a in get_args(annotation))


def _adapter(annotation: Any, default: Any) -> TypeAdapter[Any] | None:
    """How one parameter's value is made from the request (``None``: the dict as sent)."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return TypeAdapter(default)
    if _names_models(annotation):
        return TypeAdapter(annotation)
    return None


_PARAMS = ("ref", "argument", "context")
"""The params a completion function is given, in its order."""

__all__ = ["MAX_VALUES", "Completer", "no_completer"]
