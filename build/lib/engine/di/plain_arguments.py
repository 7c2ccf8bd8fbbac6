"""The plain-argument fast path: when every argument is a plain ``str``, ``int``, ``float`` or
``bool`` field, a value of exactly that type validates to itself and skips the model.

Decided once per handler here; :func:`engine.calls.arguments.validate_arguments` applies it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

REQUIRED: Any = object()
"""The default of a plain argument that has none."""
_PLAIN_TYPES: dict[type, type] = {kind: kind for kind in (str, int, float, bool)}
_PLAIN_DEFAULTS = (str, int, float, bool, type(None))


def plain_arguments(model: type[BaseModel]) -> tuple[tuple[str, type, Any], ...] | None:
    """See :attr:`engine.di.signature.Signature.plain_arguments` (``model`` is built by
    :func:`engine.di.signature.analyze`: fields only, no validators, extra keys ignored)."""
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
