"""The fingerprint of a handler's code that each journaled round carries, so replay can say
whether the code changed since a call was recorded.

It digests each function's syntax tree, read from its source: the same on every Python version
and on every replica that runs the same source, whatever its layout or comments. Bytecode would
change with the interpreter alone, and every call recorded before an upgrade (or on a replica
still on the older Python) would read as changed code. A function whose source cannot be read
(made by ``exec``, say), or a lambda that shares its first line with another, is digested by its
bytecode.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import linecache
import os
import types
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from engine._internal.introspect import callable_name


class _Hash(Protocol):
    def update(self, data: bytes, /) -> None: ...


def code_digest(fns: Iterable[Callable[..., Any]]) -> str:
    """Changes when the source of any of ``fns`` changes in more than layout and comments."""
    return _digest(fns, by_tree=True)


def bytecode_digest(fns: Iterable[Callable[..., Any]]) -> str:
    """The fingerprint journals were written with before `code_digest` (bytecode only): a
    recorded round carrying it replays as unchanged code on the same Python."""
    return _digest(fns, by_tree=False)


def _digest(fns: Iterable[Callable[..., Any]], *, by_tree: bool) -> str:
    h = hashlib.sha256()
    for code, fn in _codes(fns):
        tree = _syntax_tree(code) if by_tree and code is not None else None
        if tree is not None:
            h.update(b"tree\0")
            _feed_tree(h, tree)
        elif code is not None:
            _feed_bytecode(h, code)
        else:
            h.update(callable_name(fn).encode())
    return h.hexdigest()[:16]


def _codes(fns: Iterable[Callable[..., Any]]) -> Iterable[tuple[types.CodeType | None, Any]]:
    for fn in fns:
        target = inspect.unwrap(fn)
        code = getattr(target, "__code__", None)
        if code is None:  # a callable object
            code = getattr(type(target).__call__, "__code__", None)
        yield (code if isinstance(code, types.CodeType) else None), fn


_Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


def _syntax_tree(code: types.CodeType) -> _Definition | None:
    """The definition of ``code`` in its module's syntax tree, or None when that cannot be
    told: no source, more than one lambda starting on the line, or a file that no longer holds
    the code that runs (edited since the import: the lines the code spans do not fit)."""
    found = _definitions(code.co_filename, _file_version(code.co_filename))
    nodes = found.get((code.co_firstlineno, code.co_name), ())
    if len(nodes) != 1:
        return None
    node = nodes[0]
    lines = [line for _, _, line in code.co_lines() if line is not None]
    end = node.end_lineno
    if end is None or not lines or max(lines) > end or min(lines) < code.co_firstlineno:
        return None
    return node


def _file_version(filename: str) -> tuple[int, int] | None:
    try:
        stat = os.stat(filename)
    except OSError:  # not a file: linecache may still hold its lines (a notebook's cell)
        return None
    return stat.st_mtime_ns, stat.st_size


@functools.lru_cache(maxsize=8)
def _definitions(
    filename: str, version: tuple[int, int] | None
) -> dict[tuple[int, str], tuple[_Definition, ...]]:
    """Each function and lambda of a source file (as of ``version``) by its first line
    (decorators included, as in ``co_firstlineno``) and name: a file is parsed once for all the
    handlers registered from it (they are registered file by file, so a few trees are kept, not
    every file's)."""
    if version is not None:
        linecache.checkcache(filename)
    source = "".join(linecache.getlines(filename))
    try:
        tree = ast.parse(source) if source else None
    except (SyntaxError, ValueError):
        tree = None
    found: dict[tuple[int, str], tuple[_Definition, ...]] = {}
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            key = (first, node.name)
        elif isinstance(node, ast.Lambda):
            key = (node.lineno, "<lambda>")
        else:
            continue
        found[key] = (*found.get(key, ()), node)
    return found


def _feed_tree(h: _Hash, node: ast.AST) -> None:
    """Node types, fields and constants in order; no positions, and no empty fields, which
    newer Pythons add to the same syntax (``type_params``)."""
    parts: list[str] = []
    _tree_parts(node, parts)
    h.update("".join(parts).encode())


def _tree_parts(node: ast.AST, parts: list[str]) -> None:
    parts.append(type(node).__name__)
    parts.append("(")
    for field in node._fields:
        value = getattr(node, field, None)
        if value is None or (isinstance(value, list) and not value):
            continue
        parts.append(field)
        parts.append("=")
        for item in value if isinstance(value, list) else (value,):
            if isinstance(item, ast.AST):
                _tree_parts(item, parts)
            else:
                parts.append(f"{type(item).__name__}:{item!r},")
    parts.append(")")


def _feed_bytecode(h: _Hash, code: types.CodeType) -> None:
    h.update(code.co_qualname.encode() + b"\0" + code.co_code)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _feed_bytecode(h, const)
        else:
            h.update(repr(const).encode())
