"""``x-mcp-header``: a tool parameter mirrored in an ``Mcp-Param-<Name>`` HTTP header, checked
when the tool is registered.

A 2026-07-28 client leaves out a tool whose annotations break the rules, so a server that
listed it would offer a tool nobody can call: registration refuses it instead, naming the
property and the rule. The rules: the annotation sits on a property reached from the root
through ``properties`` alone, names an HTTP field-name token (RFC 9110), is on a ``string``,
``integer`` or ``boolean`` property, and no two name the same header, whatever the case.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator
from typing import Any

from engine.errors import InvalidSignature

KEY = "x-mcp-header"
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_TYPES = frozenset({"string", "integer", "boolean"})
_ONE_SCHEMA = frozenset(
    {
        "items",
        "contains",
        "additionalProperties",
        "unevaluatedItems",
        "unevaluatedProperties",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    }
)
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SCHEMA_MAPS = frozenset({"$defs", "definitions", "patternProperties", "dependentSchemas"})


def positions(schema: Any) -> Iterator[tuple[tuple[str, ...] | None, dict[str, Any]]]:
    """Every subschema of ``schema``, in the order written, level by level, with its path of
    property names from the root (``None`` once the way to it leaves ``properties``). Values
    (``default``, ``enum``) are not entered and ``$ref`` is not followed."""
    pending: deque[tuple[tuple[str, ...] | None, Any]] = deque([((), schema)])
    while pending:
        path, node = pending.popleft()
        if not isinstance(node, dict):
            continue
        yield path, node
        for keyword, value in node.items():
            if keyword == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    pending.append((None if path is None else (*path, name), sub))
            elif keyword in _ONE_SCHEMA:
                pending.append((None, value))
            elif keyword in _SCHEMA_LISTS and isinstance(value, list):
                pending.extend((None, sub) for sub in value)
            elif keyword in _SCHEMA_MAPS and isinstance(value, dict):
                pending.extend((None, sub) for sub in value.values())


def header_problem(schema: Any) -> str | None:
    """Why the ``x-mcp-header`` annotations of an input schema break the rules, or ``None``."""
    taken: dict[str, str] = {}
    for path, node in positions(schema):
        if KEY not in node:
            continue
        if not path:
            return f"{KEY} is allowed only on a property reached from the root through `properties`"
        where = ".".join(path)
        header = node[KEY]
        if not isinstance(header, str):
            return f"property {where!r}: {KEY} must be a string, not {type(header).__name__}"
        if not _TOKEN.fullmatch(header):
            return f"property {where!r}: {KEY} {header!r} is not an RFC 9110 token"
        kind = node.get("type")
        if not isinstance(kind, str):
            return (
                f"property {where!r}: {KEY} is only permitted on integer/string/boolean "
                f"properties (the type keyword is {type(kind).__name__}, not a string)"
            )
        if kind not in _HEADER_TYPES:
            return (
                f"property {where!r}: {KEY} is only permitted on integer/string/boolean "
                f"properties (got {kind!r})"
            )
        first = taken.setdefault(header.lower(), where)
        if first != where:
            return f"property {where!r}: {KEY} {header!r} is the header of property {first!r} too"
    return None


def check_param_headers(tool_name: str, schema: dict[str, Any]) -> dict[str, str]:
    """The header each top-level argument is mirrored in; ``InvalidSignature`` for a schema
    whose annotations a client would refuse."""
    problem = header_problem(schema)
    if problem is not None:
        raise InvalidSignature(f"Tool {tool_name!r} has an invalid {KEY} annotation: {problem}")
    return {
        argument: prop[KEY]
        for argument, prop in schema.get("properties", {}).items()
        if isinstance(prop, dict) and isinstance(prop.get(KEY), str)
    }


__all__ = ["check_param_headers", "header_problem"]
