"""A round's arguments, checked against the handler's input model before anything runs."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from engine.di.plain_arguments import REQUIRED
from engine.di.signature import Signature
from engine.errors import ToolError
from engine.role import Role


class InvalidArguments(ToolError):
    """The arguments do not match the handler's input schema."""


_MISSING: Any = object()


def validate_arguments(signature: Signature, raw: Any) -> dict[str, Any]:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise InvalidArguments(
            f"Invalid arguments for {signature.role} {signature.owner}: arguments must be an object"
        )
    plain = signature.plain_arguments
    if plain is not None:
        # Each value already of its field's exact type is what the model would give back;
        # anything else (a missing required value, 5 for a float, "5" for an int) goes through
        # the model, which converts it or says what is wrong.
        arguments: dict[str, Any] = {}
        for name, kind, default in plain:
            value = raw.get(name, _MISSING)
            if type(value) is not kind:
                if value is not _MISSING or default is REQUIRED:
                    break
                value = default  # as the model does, an omitted value's default is not validated
            arguments[name] = value
        else:
            return arguments
    try:
        model = signature.validator.validate_python(raw)
    except ValidationError as exc:
        raise InvalidArguments(
            f"Invalid arguments for {signature.role} {signature.owner}: "
            + summarize(exc, missing_together=signature.role is Role.PROMPT)
        ) from exc
    return {name: getattr(model, name) for name in signature.argument_names}


def summarize(exc: ValidationError, *, missing_together: bool = False) -> str:
    """A readable one-line summary of a validation error: ``field: problem; ...``.

    ``missing_together``: the arguments left out are named first, in one ``Missing required
    arguments: a, b`` (a prompt's arguments are a form a user fills, where that reads best).
    """
    parts, missing = [], []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"]) or "arguments"
        if missing_together and error["type"] == "missing":
            missing.append(where)
        else:
            parts.append(f"{where}: {error['msg']}")
    if missing:
        parts.insert(0, "Missing required arguments: " + ", ".join(missing))
    return "; ".join(parts)
