"""What a function's parameters and annotations say: a Context, a ``Resolve`` marker, a union's
members, a question's arms, the whole elicitation outcome, a generator's yielded type.

Pure readings shared by the planner and :func:`~engine.di.signature.analyze`; they decide nothing.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Iterator
from typing import Annotated, Any, get_args, get_origin

from engine._internal.introspect import is_union
from engine.di.redacted import Redacted
from engine.di.resolve import Resolve
from engine.errors import InvalidSignature
from engine.questions.kinds import (
    AcceptedElicitation,
    CancelledElicitation,
    DeclinedElicitation,
    ElicitationResult,
    Question,
)


def named_parameters(
    signature: inspect.Signature, label: str, problem: str
) -> Iterator[inspect.Parameter]:
    """The parameters of ``signature`` in order; reaching ``*args`` or ``**kwargs`` fails with
    ``{label} parameter {name!r}: *args and **kwargs {problem}; name each parameter``."""
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise InvalidSignature(
                f"{label} parameter {param.name!r}: *args and **kwargs {problem}; "
                "name each parameter"
            )
        if isinstance(param.default, Resolve):
            raise InvalidSignature(
                f"{label} parameter {param.name!r}: Resolve(...) is given as its default value; "
                f"declare it in the annotation instead: "
                f"{param.name}: Annotated[{_annotation_text(param.annotation)}, {param.default!r}]"
            )
        yield param


def _annotation_text(annotation: Any) -> str:
    if annotation is inspect.Parameter.empty:
        return "T"
    if isinstance(annotation, str):
        return annotation
    return getattr(annotation, "__name__", None) or repr(annotation)


def is_redacted(annotation: Any) -> bool:
    """Whether an argument's annotation carries a ``Redacted()`` marker."""
    if get_origin(annotation) is not Annotated:
        return False
    return any(isinstance(meta, Redacted) for meta in annotation.__metadata__)


def is_context_annotation(annotation: Any) -> bool:
    from engine.context import Context

    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    candidates = union_members(annotation)
    for candidate in candidates:
        origin = get_origin(candidate) or candidate
        if isinstance(origin, type) and issubclass(origin, Context):
            return True
    return False


def union_members(annotation: Any) -> tuple[Any, ...]:
    """The members of a union (through a ``type`` alias), or the annotation alone."""
    if isinstance(annotation, typing.TypeAliasType if hasattr(typing, "TypeAliasType") else ()):
        annotation = annotation.__value__
    return get_args(annotation) if is_union(annotation) else (annotation,)


def resolve_marker(annotation: Any) -> tuple[Any, Resolve] | None:
    """``(T, marker)`` for ``Annotated[T, Resolve(...)]``, otherwise ``None``."""
    if get_origin(annotation) is not Annotated:
        return None
    inner, *metadata = get_args(annotation)
    for item in metadata:
        if isinstance(item, Resolve):
            return inner, item
    return None


def has_nested_resolve(annotation: Any) -> bool:
    """Whether a union member carries a ``Resolve`` marker (which the engine refuses)."""
    return any(resolve_marker(member) is not None for member in union_members(annotation))


_OUTCOMES = (AcceptedElicitation, DeclinedElicitation, CancelledElicitation)


def wants_union(annotation: Any) -> bool:
    """Whether a consumer asked for the whole accept/decline/cancel outcome."""
    origin = get_origin(annotation)
    if annotation is ElicitationResult or origin is ElicitationResult:
        return True
    for member in union_members(annotation):
        base = getattr(member, "__pydantic_generic_metadata__", {}).get("origin") or member
        base = get_origin(base) or base
        if isinstance(base, type) and issubclass(base, _OUTCOMES):
            return True
    return False


def question_arms(annotation: Any) -> tuple[list[Any], list[Any]]:
    """Split a return annotation into (question arms, value arms)."""
    questions: list[Any] = []
    values: list[Any] = []
    for member in union_members(annotation):
        base = get_origin(member) or member
        if isinstance(base, type) and issubclass(base, Question):
            questions.append(member)
        else:
            values.append(member)
    return questions, values


def yielded_type(annotation: Any) -> Any:
    """What a generator's return annotation says it yields (``Any`` when it does not say)."""
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
