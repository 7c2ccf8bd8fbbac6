"""A returned value that asks the client for input: an ``InputRequiredResult``, recognised the
same way wherever a handler may return one (a tool, a prompt, a resource, a template object).

It may be ours, a dict of its wire form (with ``"resultType": "input_required"``: a dict
without it is a tool's structured result), or another library's pydantic model of its shape
(``mcp_types``'), whatever else that model carries.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from engine._internal.typecache import remembered
from engine.types import InputRequiredResult, wire_of


def is_input_required_model(annotation: Any) -> bool:
    """Whether ``annotation`` is our ``InputRequiredResult`` or a pydantic model of its shape."""
    if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return False
    if issubclass(annotation, InputRequiredResult):
        return True
    fields = annotation.model_fields
    return "input_requests" in fields and "request_state" in fields


NEVER_ASKS = frozenset({str, int, float, bool, bytes, list, type(None)})
"""Types whose values are never input requests: a caller on a hot path tests these first,
one set lookup instead of a call."""

_may_ask = remembered(lambda kind: kind is dict or is_input_required_model(kind))


def input_required_of(value: Any) -> InputRequiredResult | None:
    """The input requests a handler returned instead of its value; ``None`` for any other
    value."""
    kind = type(value)
    if not _may_ask(kind) or (kind is dict and value.get("resultType") != "input_required"):
        return None
    if kind is InputRequiredResult:
        return value  # type: ignore[no-any-return]
    wire = wire_of(value)
    wire.pop("resultType", None)
    return InputRequiredResult.model_validate(wire)


__all__ = ["NEVER_ASKS", "input_required_of", "is_input_required_model"]
