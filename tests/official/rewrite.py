"""Rewrite the imports of official ``mcp`` code so that it runs against this project's server.

The rule is the one docs/porting.md gives a user: whatever comes from ``mcp.server.mcpserver``
(the package or any module under it), ``MCPServer`` from ``mcp.server`` and ``get_access_token``
from ``mcp.server.auth.middleware.auth_context``, comes from ``engine``. Everything else stays
official: the client, ``mcp_types``, the low-level server. Only import statements change; the
rest of each file is kept byte for byte.

A name ``engine`` does not export (an official internal, such as ``ToolManager`` or a private
helper of the official resolver) is bound to a placeholder that fails when a test uses it, so
that one module-level import of an internal does not take every test of its file down: the
tests that use one are in excluded.txt, or fail. A public name (one of the official package's
``__all__``) that ``engine`` lacks is no internal: user code importing it would get an
``ImportError``, so the rewrite stops with :class:`MissingExport` naming it, unless it is one
of the few :data:`NOT_PROVIDED` on purpose.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

OFFICIAL_PACKAGE = "mcp.server.mcpserver"
MOVED_ONE_BY_ONE = {
    "mcp.server": frozenset({"MCPServer"}),
    "mcp.server.auth.middleware.auth_context": frozenset({"get_access_token"}),
}
"""Names outside ``mcp.server.mcpserver`` that come from ``engine`` too: ``MCPServer``, which
``mcp.server`` re-exports, and ``get_access_token``, which reads the request being served."""

NOT_PROVIDED = {
    "AESGCMRequestStateCodec": (
        "the official requestState token's own byte format; this server seals its own tokens "
        "(RequestStateSecurity(keys=...)), and takes a codec of yours with codec="
    ),
    "RequestStateBoundary": (
        "sealing middleware for the official low-level Server; this server seals every round itself"
    ),
}
"""Public names of ``mcp.server.mcpserver`` that ``engine`` does not provide, on purpose, with
why (docs/porting.md lists them): bound to placeholders, as internals are."""


class MissingExport(Exception):
    """A public name of the official package that ``engine`` does not export."""


def official_public_names() -> frozenset[str]:
    """``mcp.server.mcpserver.__all__``: what the official SDK calls its public API."""
    import importlib

    return frozenset(importlib.import_module(OFFICIAL_PACKAGE).__all__)


def _is_official_server_module(module: str) -> bool:
    return module == OFFICIAL_PACKAGE or module.startswith(OFFICIAL_PACKAGE + ".")


def _names(aliases: list[ast.alias]) -> str:
    return ", ".join(a.name if a.asname is None else f"{a.name} as {a.asname}" for a in aliases)


def _from_engine(module: str, aliases: list[ast.alias]) -> str:
    import engine

    exported = [a for a in aliases if a.name != "*" and hasattr(engine, a.name)]
    missing = [a for a in aliases if a not in exported]
    public = official_public_names()
    lacking = [a.name for a in missing if a.name in public and a.name not in NOT_PROVIDED]
    if lacking:
        raise MissingExport(
            f"{', '.join(lacking)} (imported from {module}) is public in the official SDK "
            f"({OFFICIAL_PACKAGE}.__all__), and engine does not export it: code written for the "
            "official server would fail to import. Export it from engine/__init__.py, or, if "
            "engine must not provide it, add it to NOT_PROVIDED in tests/official/rewrite.py "
            "with the reason (and to docs/porting.md)"
        )
    statements = [f"from engine import {_names(exported)}"] if exported else []
    if missing:
        statements.append("from official_internal import unbound")
        statements += [
            f"{a.asname or a.name} = unbound({module + '.' + a.name!r})" for a in missing
        ]
    return "; ".join(statements)


def _rewritten(node: ast.stmt) -> str | None:
    """The new text of one import statement, or None to keep it."""
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
        if _is_official_server_module(node.module):
            return _from_engine(node.module, node.names)
        names = MOVED_ONE_BY_ONE.get(node.module)
        if names is not None:
            moved = [a for a in node.names if a.name in names]
            if not moved:
                return None
            kept = [a for a in node.names if a.name not in names]
            lines = [f"from engine import {_names(moved)}"]
            if kept:
                lines.append(f"from {node.module} import {_names(kept)}")
            return "; ".join(lines)
    return None


def rewrite_source(source: str) -> str:
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, int, int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        new = _rewritten(node)
        if new is None:
            continue
        assert node.end_lineno is not None and node.end_col_offset is not None
        edits.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, new))
    for start, start_col, end, end_col, new in sorted(edits, reverse=True):
        head = lines[start - 1][:start_col]
        tail = lines[end - 1][end_col:]
        lines[start - 1 : end] = [head + new + tail]
    return "".join(lines)


def rewrite_tree(root: Path) -> int:
    """Rewrite every ``.py`` file under ``root`` in place; return how many changed."""
    changed = 0
    for path in sorted(root.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        new = rewrite_source(source)
        if new != source:
            path.write_text(new, encoding="utf-8")
            changed += 1
    return changed


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(rewrite_source(Path(name).read_text(encoding="utf-8")))
