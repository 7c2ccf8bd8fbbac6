"""A tool's structured output: its ``outputSchema`` and how a returned value becomes
``structuredContent``, both decided once, at registration, from the return annotation.

The rules are the official SDK's, so a ported tool lists the same schema and sends the same
structured content:

- a pydantic model, a ``TypedDict`` or a class with annotated attributes (a dataclass) is the
  schema itself; ``dict[str, V]`` is an object schema of ``V`` values;
- anything else with a schema (``int``, ``list[Book]``, ``str | None``, ``Any``) is wrapped as
  ``{"result": value}``;
- content (blocks, ``Image``, ``Audio``) and ``CallToolResult`` have none;
  ``Annotated[CallToolResult, Model]`` declares ``Model`` as the schema of the result's
  ``structured_content``;
- a class without annotations has none; ``structured_output=True`` makes that an error, and
  ``structured_output=False`` drops the schema whatever the annotation.

A returned value is validated against the schema's type before it is sent: one that does not
fit fails the call, as an error result.
"""

from __future__ import annotations

import inspect
import sys
import types
from dataclasses import dataclass
from typing import (
    Annotated,
    Any,
    ClassVar,
    NotRequired,
    Required,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, TypeAdapter, create_model
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaWarningKind
from typing_extensions import TypedDict as PydanticTypedDict
from typing_extensions import is_typeddict

from engine._internal.introspect import is_union
from engine.errors import InvalidSignature
from engine.handlers.content import is_result_class, returns_content

_SCALARS = (str, int, float, bool)
_WRAPPED_CLASSES = (str, int, float, bool, bytes, type(None))
_DEFS = "#/$defs/"


@dataclass(frozen=True, slots=True)
class OutputShape:
    """How a tool's returned value becomes structured content."""

    schema: dict[str, Any] | None
    """The listed ``outputSchema``; ``None``: the tool sends no structured content."""
    wrap: bool = False
    """Sent as ``{"result": value}``."""
    adapter: TypeAdapter[Any] | None = None
    """Validates structured content (a wrapped value as ``{"result": value}``) and dumps it as
    JSON."""
    scalar: type | None = None
    """``str``, ``int``, ``float`` or ``bool`` when that is the annotation: a value of exactly
    that type is its own JSON, with no validator call."""
    model: type[BaseModel] | None = None
    """The annotation, when it is a pydantic model: an instance is dumped as it is."""

    def structured(self, value: Any) -> Any:
        """The ``structuredContent`` of ``value`` (pydantic's ``ValidationError`` when it does
        not fit the schema)."""
        if type(value) is self.scalar:
            return {"result": value}
        model = self.model
        if model is not None and (type(value) is model or isinstance(value, model)):
            return value.model_dump(mode="json", by_alias=True)
        return self.validated({"result": value} if self.wrap else value)

    def validated(self, structured: Any) -> Any:
        """``structured`` checked against the schema, as JSON; also what checks the
        ``structured_content`` of a ``CallToolResult`` the tool built itself."""
        assert self.adapter is not None
        checked = self.adapter.validate_python(structured, by_alias=True, by_name=True)
        if isinstance(checked, BaseModel):  # a subclass keeps its own fields
            return checked.model_dump(mode="json", by_alias=True)
        return self.adapter.dump_python(checked, mode="json", by_alias=True)


NO_OUTPUT = OutputShape(None)


class _StrictSchema(GenerateJsonSchema):
    """Refuses what pydantic would only warn about: a type with no JSON form gets no schema."""

    def emit_warning(self, kind: JsonSchemaWarningKind, detail: str) -> None:
        raise ValueError(f"{kind}: {detail}")


def output_shape(
    fn_name: str, annotation: Any, structured_output: bool | None = None
) -> OutputShape:
    """The structured output of a tool named ``fn_name`` returning ``annotation``."""
    if structured_output is False:
        return NO_OUTPUT
    if annotation is inspect.Signature.empty:
        if structured_output:
            raise InvalidSignature(
                f"Tool {fn_name!r}: structured_output=True needs a return annotation to build "
                "the output schema from"
            )
        return NO_OUTPUT
    bare, metadata = _unannotated(annotation)
    if is_union(bare):
        arms = [arm for arm in get_args(bare) if arm is not type(None)]
        if len(get_args(bare)) > 1 and any(is_result_class(arm) for arm in arms):
            raise InvalidSignature(
                f"Tool {fn_name!r}: a CallToolResult cannot be one arm of a union; return "
                "CallToolResult(content=[]) for an empty result"
            )
    if is_result_class(bare):
        if not metadata:
            return NO_OUTPUT
        annotation = metadata[0] if len(metadata) == 1 else Annotated[(metadata[0], *metadata[1:])]
        bare, _ = _unannotated(metadata[0])
    elif structured_output is None and returns_content(bare):
        return NO_OUTPUT
    annotation = _readable_typeddicts(annotation)
    bare, _ = _unannotated(annotation)
    adapter: TypeAdapter[Any] | None = None
    try:
        target, wrap = _output_type(fn_name, annotation, bare)
        if target is not None:
            adapter = TypeAdapter(target)
            schema = _inline_root(adapter.json_schema(schema_generator=_StrictSchema))
    except (PydanticUserError, NameError, TypeError, ValueError, pydantic_core.SchemaError):
        adapter = None  # no JSON schema for this type: the tool sends content only
    if adapter is not None:
        model = bare if not wrap and _is_model_class(bare) else None
        scalar = bare if wrap and bare in _SCALARS and not metadata else None
        return OutputShape(schema, wrap, adapter, scalar, model)
    if structured_output:
        raise InvalidSignature(
            f"Tool {fn_name!r}: return type {bare!r} is not serializable for structured output; "
            "return a pydantic model, a TypedDict, a dataclass or a JSON type"
        )
    return NO_OUTPUT


def _output_type(fn_name: str, annotation: Any, bare: Any) -> tuple[Any, bool]:
    """The type structured content is validated against, and whether it is wrapped; ``None``
    for a class that has no annotated attributes to build one from."""
    if isinstance(bare, types.GenericAlias):
        args = get_args(bare)
        if get_origin(bare) is dict and len(args) == 2 and args[0] is str:
            return Annotated[bare, Field(title=f"{fn_name}DictOutput")], False
        return _wrapper(fn_name, annotation), True
    if not isinstance(bare, type):  # unions, Any, Literal, typing generics
        return _wrapper(fn_name, annotation), True
    if _is_model_class(bare) or is_typeddict(bare):
        return bare, False
    if bare in _WRAPPED_CLASSES:
        return _wrapper(fn_name, annotation), True
    try:
        hints = get_type_hints(bare)
    except Exception:
        return None, False
    fields: dict[str, Any] = {}
    for name, hint in hints.items():
        if name.startswith("_") or get_origin(hint) is ClassVar:
            continue
        default = getattr(bare, name, inspect.Parameter.empty)
        hint = _readable_typeddicts(hint)
        fields[name] = hint if default is inspect.Parameter.empty else (hint, default)
    if not fields:
        return None, False
    config = ConfigDict(from_attributes=True)
    return create_model(bare.__name__, __config__=config, **fields), False


def _wrapper(fn_name: str, annotation: Any) -> type[BaseModel]:
    """The model a wrapped value's schema is listed as: one required ``result`` field."""
    return create_model(f"{fn_name}Output", result=(annotation, ...))


def _unannotated(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    if get_origin(annotation) is Annotated:
        base, *metadata = get_args(annotation)
        return base, tuple(metadata)
    return annotation, ()


def _is_model_class(cls: Any) -> bool:
    return isinstance(cls, type) and issubclass(cls, BaseModel)


def _inline_root(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema whose root is only a ``$ref`` (a model that refers to itself) with that
    definition copied to the root: an output schema's root must be an object."""
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith(_DEFS):
        return schema
    definition = schema["$defs"][ref.removeprefix(_DEFS)]
    return {**definition, **{key: value for key, value in schema.items() if key != "$ref"}}


def _readable_typeddicts(annotation: Any) -> Any:
    """Below Python 3.12 pydantic reads only ``typing_extensions.TypedDict``: every
    ``typing.TypedDict`` in ``annotation`` (itself, an argument of a generic such as
    ``list[Row]``, the type of another's key) is made again as one, with the same keys and
    requiredness."""
    if sys.version_info >= (3, 12):
        return annotation
    return _rebuilt(annotation, {})


def _rebuilt(annotation: Any, done: dict[Any, Any]) -> Any:
    if is_typeddict(annotation):
        if type(annotation).__module__ != "typing":
            return annotation
        if annotation not in done:
            done[annotation] = annotation  # a TypedDict that names itself stays as it is
            done[annotation] = _rebuilt_typeddict(annotation, done)
        return done[annotation]
    args = get_args(annotation)
    if not args:
        return annotation
    origin = get_origin(annotation)
    if origin is Annotated:
        base = _rebuilt(args[0], done)
        return annotation if base is args[0] else Annotated[(base, *args[1:])]
    rebuilt = tuple(_rebuilt(arg, done) for arg in args)
    if all(new is old for new, old in zip(rebuilt, args, strict=True)):
        return annotation
    if isinstance(annotation, types.GenericAlias):
        return types.GenericAlias(origin, rebuilt)
    if isinstance(annotation, types.UnionType):
        return Union[rebuilt]  # noqa: UP007 (arms known only at run time)
    copy_with = getattr(annotation, "copy_with", None)  # typing's own generics
    return annotation if copy_with is None else copy_with(rebuilt)


def _rebuilt_typeddict(target: Any, done: dict[Any, Any]) -> Any:
    required: frozenset[str] = target.__required_keys__
    keys: dict[str, Any] = {}
    for name, hint in get_type_hints(target, include_extras=True).items():
        while get_origin(hint) in (Required, NotRequired):
            (hint,) = get_args(hint)
        hint = _rebuilt(hint, done)
        keys[name] = hint if name in required else NotRequired[hint]
    make: Any = PydanticTypedDict  # the functional form, with names known only at run time
    rebuilt = make(target.__name__, keys)
    for attribute in ("__doc__", "__module__", "__qualname__", "__pydantic_config__"):
        if hasattr(target, attribute):
            setattr(rebuilt, attribute, getattr(target, attribute))
    return rebuilt


__all__ = ["NO_OUTPUT", "OutputShape", "output_shape"]
