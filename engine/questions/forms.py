"""Elicitation forms: the restricted JSON schema a pydantic model is shown to the user as."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import BaseModel

_PRIMITIVES = {"string", "number", "integer", "boolean"}


@lru_cache(maxsize=512)
def elicitation_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The restricted JSON schema of a form: a flat object of primitive properties, titled as
    pydantic titles the model. An optional field (``int | None = None``) is shown as its type,
    left out of ``required``, with no ``null`` default.

    Raises :class:`TypeError` naming the field when the model cannot be shown as a form.
    """
    schema = model.model_json_schema()
    properties: dict[str, Any] = {}
    for name, prop in schema.get("properties", {}).items():
        properties[name] = _flat_property(model, name, prop)
    rendered: dict[str, Any] = {"properties": properties}
    if schema.get("required"):
        rendered["required"] = list(schema["required"])
    if "title" in schema:
        rendered["title"] = schema["title"]
    rendered["type"] = "object"
    return rendered


def _flat_property(model: type[BaseModel], name: str, prop: dict[str, Any]) -> dict[str, Any]:
    prop = dict(prop)
    options = prop.pop("anyOf", None)
    if options is not None:
        kept = [o for o in options if o.get("type") != "null"]
        if len(kept) != 1:
            raise TypeError(
                f"Field {name!r} of {model.__name__} is a union; an elicitation form field must "
                "be a single string, number, integer, boolean or enum"
            )
        prop = {**kept[0], **prop}
    if "default" in prop and prop["default"] is None:
        del prop["default"]
    kind = prop.get("type")
    if kind in _PRIMITIVES:
        return prop
    items = prop.get("items")
    if kind == "array" and isinstance(items, dict) and ("enum" in items or "anyOf" in items):
        return prop
    raise TypeError(
        f"Field {name!r} of {model.__name__} cannot be shown in an elicitation form: use a "
        "string, number, integer, boolean, enum or a list of enum strings"
    )
