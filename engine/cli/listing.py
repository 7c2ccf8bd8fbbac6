"""``python -m engine list TARGET``: what a server offers, with the schemas, to read or to script.

``server/discover``, then ``tools/list``, ``prompts/list``, ``resources/list`` and
``resources/templates/list`` (every page of each); a method the server does not have lists
nothing. On a terminal each tool is shown with its parameters (type, required, description)
and its input and output schemas; ``--json`` prints everything as one JSON object. Whatever the
server sent is shown inert (:mod:`engine._internal.inert`).
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from engine._internal.inert import inert, inert_json, inert_lines
from engine.cli.connections import Connection
from engine.cli.http_session import ProtocolFailure
from engine.cli.style import Style
from engine.debug.render import describe_field

KINDS = (
    ("tools", "tools/list"),
    ("prompts", "prompts/list"),
    ("resources", "resources/list"),
    ("resourceTemplates", "resources/templates/list"),
)


def gather(connection: Connection) -> dict[str, Any]:
    """Everything the server lists, as ``{"server": ..., "tools": [...], ...}``."""
    discovered = connection.request("server/discover", {})
    meta = discovered.pop("_meta", None)
    info = meta.get("io.modelcontextprotocol/serverInfo") if isinstance(meta, dict) else None
    if isinstance(info, dict):
        discovered = {"serverInfo": info, **discovered}
    for hint in ("resultType", "ttlMs", "cacheScope"):
        discovered.pop(hint, None)
    found: dict[str, Any] = {"server": discovered}
    for key, method in KINDS:
        items: list[Any] = []
        cursor: str | None = None
        for _ in range(1000):
            params = {"cursor": cursor} if cursor else {}
            try:
                page = connection.request(method, params)
            except ProtocolFailure as exc:
                if "-32601" in str(exc):  # method not found: the server has none of these
                    break
                raise
            items.extend(page.get(key) or [])
            cursor = page.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                break
        found[key] = items
    return found


def print_listing(found: dict[str, Any], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    style = Style.for_stream(out)

    def say(text: str = "") -> None:
        print(text, file=out)

    server = found.get("server") or {}
    info = server.get("serverInfo") or {}
    name = info.get("name", "?")
    version = f" {info['version']}" if info.get("version") else ""
    eras = ", ".join(map(str, server.get("supportedVersions") or []))
    say(style.header(f"server {name}{version}") + inert(f" (speaks {eras})" if eras else ""))
    if server.get("instructions"):
        for line in inert_lines(str(server["instructions"])):
            say(f"  {line}")
    for key, title in (
        ("tools", "tools"),
        ("prompts", "prompts"),
        ("resources", "resources"),
        ("resourceTemplates", "resource templates"),
    ):
        items = found.get(key) or []
        say()
        say(style.header(f"{title} ({len(items)})"))
        for item in items:
            if not isinstance(item, dict):
                continue
            if key == "tools":
                _tool(item, say, style)
            elif key == "prompts":
                _prompt(item, say, style)
            else:
                _resource(item, say, style)


def _headline(item: dict[str, Any], label: str, say: Any, style: Style) -> None:
    """The name (and the title a host shows for it), the description, the annotations."""
    annotations = item.get("annotations")
    annotations = annotations if isinstance(annotations, dict) else {}
    title = item.get("title") or annotations.get("title")
    say(f"  {style.bold(label)}" + (f" — {inert(str(title))}" if title else ""))
    if item.get("description"):
        for line in inert_lines(str(item["description"]).strip()):
            say(f"    {line}")
    hints = [
        f"{inert(k)}={inert(json.dumps(v, ensure_ascii=False))}"
        for k, v in annotations.items()
        if k != "title"
    ]
    if hints:
        say("    annotations: " + ", ".join(hints))


def _tool(tool: dict[str, Any], say: Any, style: Style) -> None:
    _headline(tool, str(tool.get("name")), say, style)
    schema = tool.get("inputSchema") or {}
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    if props:
        say("    parameters:")
        for name, prop in props.items():
            say("      " + describe_field(name, prop, name in required))
    else:
        say("    parameters: none")
    say("    input schema: " + inert_json(schema))
    if tool.get("outputSchema"):
        say("    output schema: " + inert_json(tool["outputSchema"]))


def _prompt(prompt: dict[str, Any], say: Any, style: Style) -> None:
    _headline(prompt, str(prompt.get("name")), say, style)
    for argument in prompt.get("arguments") or []:
        if isinstance(argument, dict):
            need = "required" if argument.get("required") else "optional"
            about = f": {argument['description']}" if argument.get("description") else ""
            say(inert(f"      {argument.get('name')} ({need}){about}"))


def _resource(resource: dict[str, Any], say: Any, style: Style) -> None:
    uri = resource.get("uri") or resource.get("uriTemplate")
    kind = f" [{resource['mimeType']}]" if resource.get("mimeType") else ""
    _headline(resource, f"{uri}  {resource.get('name', '')}{kind}".rstrip(), say, style)
