"""How a group of settings is declared, read from the environment and checked.

A group is a pydantic model whose fields are settings, each declared once: its default, its
bounds, its docstring, and its alias, the keyword ``MCPServer(...)`` takes. The environment
variable is that keyword in capitals after ``ENGINE_`` (``state_ttl``: ``ENGINE_STATE_TTL``),
read with pydantic-settings. A field marked :data:`CODE_ONLY` (an object, a callback, a keyword
of the official server's own) has no variable; one marked :data:`ENVIRONMENT_ONLY` (how ``serve``
runs) no keyword; one without an alias is no setting but a value the server passes on (its name,
a nested group).

:meth:`SettingGroup.of` makes a group: a keyword given (not ``None``) wins over the variable,
which wins over the default. The environment is text and parsed as such (``"16"`` is 16, ``on``
is true); code gives typed values, checked strictly (``"16"`` and ``True`` are no count). A value
refused names the keyword or the variable it came from, what it was, and what is allowed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import NoneType, UnionType
from typing import Any, ClassVar, Literal, Self, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

ENV_PREFIX = "ENGINE_"


@dataclass(frozen=True, slots=True)
class Unit:
    """What a number counts (``seconds``, ``bytes``), said in its error message."""

    name: str


@dataclass(frozen=True, slots=True)
class Allowed:
    """What a setting with a check of its own allows, said in its error message."""

    text: str


@dataclass(frozen=True, slots=True)
class _Marker:
    name: str


CODE_ONLY = _Marker("code only")
"""A keyword without an ``ENGINE_`` variable: an object or a callback, which text cannot be, or
a keyword the official server takes (``log_level``, ``debug``), which code gives there too."""

ENVIRONMENT_ONLY = _Marker("environment only")
"""An ``ENGINE_`` variable without a keyword: how the process is served, not the server."""


def keyword_of(field: FieldInfo) -> str | None:
    """The ``MCPServer(...)`` keyword of a setting; ``None`` for one given otherwise."""
    if field.alias is None or ENVIRONMENT_ONLY in field.metadata:
        return None
    return field.alias


def variable_of(field: FieldInfo) -> str | None:
    """The ``ENGINE_`` variable of a setting; ``None`` for one code alone gives."""
    if field.alias is None or CODE_ONLY in field.metadata:
        return None
    return ENV_PREFIX + field.alias.upper()


class SettingGroup(BaseModel):
    """Settings read by one part of the engine: frozen, each declared once (see the module).

    A model rather than pydantic-settings' ``BaseSettings``, whose construction reads
    ``os.environ`` and checks code's values and the environment's text alike: :meth:`of` reads
    the variables with pydantic-settings' own source (``engine._internal.environment``), from
    the environment it is given.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        arbitrary_types_allowed=True,
        allow_inf_nan=False,
        defer_build=True,  # checked when a server is first made, not when the engine is imported
    )

    @classmethod
    def of(
        cls,
        options: Mapping[str, Any],
        environ: Mapping[str, str] | None = None,
        /,
        **passed: Any,
    ) -> Self:
        """The group from the keywords in ``options`` (``None`` is not given), else their
        variables in ``environ`` (``os.environ`` unless given), else their defaults.
        ``passed``: values by field name that are no keyword (or defaults that depend on the
        server, such as its name), below the environment."""
        fields = dict(settings_of(cls))
        given = {
            name: value
            for name, value in options.items()
            if value is not None and name in fields and keyword_of(fields[name]) is not None
        }
        from_environment = cls._from_environment(environ, passed)
        try:
            return cls.model_validate({**passed, **from_environment, **given}, strict=True)
        except ValidationError as error:
            raise ValueError(_described(cls, error, environment=False)) from None

    @classmethod
    def _from_environment(
        cls, environ: Mapping[str, str] | None, passed: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The settings set in the environment, parsed from their text and checked."""
        from engine._internal.environment import variables  # with the first server, not the engine

        texts = variables(cls, environ, prefix=ENV_PREFIX, reads=_has_variable)
        if not texts:
            return {}
        try:
            parsed = cls.model_validate({**passed, **texts})
        except ValidationError as error:
            raise ValueError(_described(cls, error, environment=True)) from None
        return {
            alias: getattr(parsed, name)
            for name, field in cls.model_fields.items()
            if (alias := field.alias) is not None and alias in texts
        }


class ChangeableGroup(SettingGroup):
    """A group of which code may change the settings named in ``changeable`` once the server is
    made (what the official server's ``mcp.settings`` lets code change), each checked as a
    keyword is; the others stay as they were made, and changing one says so.
    """

    model_config = ConfigDict(frozen=False)
    changeable: ClassVar[frozenset[str]] = frozenset()
    """Field names code may set."""
    changeable_properties: ClassVar[frozenset[str]] = frozenset()
    """Properties code may set too (named with the fields when a fixed one is set)."""

    def __setattr__(self, name: str, value: Any) -> None:
        cls = type(self)
        field = cls.model_fields.get(name)
        if field is None:  # a property, or no setting: pydantic's own ValueError names it
            super().__setattr__(name, value)
            return
        keyword = keyword_of(field) or name
        if name not in cls.changeable:
            raise ValueError(
                f"settings.{keyword} is fixed once the server is made: give it to "
                "MCPServer(...); code may change only "
                + ", ".join(sorted(cls.changeable | cls.changeable_properties))
            )
        try:
            cls.__pydantic_validator__.validate_assignment(self, name, value, strict=True)
        except ValidationError as error:
            raise ValueError(_described(cls, error, environment=False)) from None


def _has_variable(field: FieldInfo) -> bool:
    return variable_of(field) is not None


def settings_of(group: type[SettingGroup]) -> Iterator[tuple[str, FieldInfo]]:
    """``(keyword, field)`` of each setting of ``group`` (by its alias), in declaration order."""
    for field in group.model_fields.values():
        if field.alias is not None:
            yield field.alias, field


def _described(group: type[SettingGroup], error: ValidationError, *, environment: bool) -> str:
    """One line per refused value: the keyword or variable, what it was, what is allowed."""
    fields = dict(settings_of(group))
    lines = []
    for problem in error.errors(include_url=False):
        where = str(problem["loc"][0]) if problem["loc"] else ""
        field = fields.get(where) or group.model_fields.get(where)
        if field is None:
            lines.append(f"{where}: {problem['msg']}" if where else problem["msg"])
            continue
        name = (variable_of(field) if environment else keyword_of(field)) or where
        custom = problem["type"] == "value_error" and not _has(field, Allowed)
        if custom:
            message = str(problem["ctx"]["error"])
            lines.append(message if message.startswith(name) else f"{name}: {message}")
            continue
        unset = "unset it" if environment else "leave it out"
        default = "" if field.default in (None, PydanticUndefined) else f", {field.default!r}"
        lines.append(
            f"{name} must be {allowed(field, environment=environment)}, got "
            f"{problem['input']!r}; {unset} for the default{default}"
        )
    return "\n".join(lines)


def _has(field: FieldInfo, kind: type[Any]) -> Any:
    return next((item for item in field.metadata if isinstance(item, kind)), None)


def allowed(field: FieldInfo, *, environment: bool = False) -> str:
    """What a setting takes, in words: from its type, unit and bounds, or its own ``Allowed``."""
    if (own := _has(field, Allowed)) is not None:
        return str(own.text)
    kind = _without_none(field.annotation)
    if get_origin(kind) is Literal:
        return "one of " + ", ".join(str(choice) for choice in get_args(kind))
    if kind is bool:
        return "1, true, yes or on, or 0, false, no or off" if environment else "True or False"
    if kind is str:
        return "non-empty text" if _bound(field, "min_length") else "text"
    if kind not in (int, float):
        return "a " + getattr(kind, "__name__", str(kind))
    words = "a whole number" if kind is int else "a number"
    if (unit := _has(field, Unit)) is not None:
        words += f" of {unit.name}"
    low, high, above = (_bound(field, name) for name in ("ge", "le", "gt"))
    if low is not None and high is not None:
        return f"{words} from {_number(low)} to {_number(high)}"
    if low is not None:
        return f"{words}, at least {_number(low)}"
    if above is not None:
        return f"{words}, more than {_number(above)}"
    return words


def _bound(field: FieldInfo, name: str) -> Any:
    """``Field(ge=...)`` and the like: pydantic keeps each as an item of the field's metadata."""
    return next((getattr(item, name) for item in field.metadata if hasattr(item, name)), None)


def _without_none(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, UnionType):
        members = [member for member in get_args(annotation) if member is not NoneType]
        if len(members) == 1:
            return members[0]
    return annotation


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
