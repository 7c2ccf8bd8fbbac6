"""Checks for a value from a URI that a resource function will use as a file path.

A template variable is decoded before the function sees it, so ``..%2F..%2Fetc`` arrives as
``../../etc``: the URI's own structure protects nothing. :func:`contains_path_traversal` and
:func:`is_absolute_path` look at the value alone (what :class:`ResourceSecurity` refuses by
default); :func:`safe_join` knows the directory served and resolves the path, symlinks included.
"""

from __future__ import annotations

from pathlib import Path


class PathEscapeError(ValueError):
    """:func:`safe_join` refused a path that would leave its base directory."""


def contains_path_traversal(value: str) -> bool:
    """Whether ``value``, read as a relative path (``/`` or ``\\`` between parts), climbs
    above where it starts: ``..`` as a whole part, more of them than parts before. ``a/../b``
    stays inside, and ``v1.0..v2.0`` has no ``..`` part at all."""
    depth = 0
    for part in value.replace("\\", "/").split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return True
        elif part not in ("", "."):
            depth += 1
    return False


def is_absolute_path(value: str) -> bool:
    """Whether ``value`` is absolute on some platform: ``/x``, ``\\x``, ``\\\\host\\share``,
    or starts with a drive letter (``C:\\x``, and ``C:x``, which discards a join's base too).
    Joining such a value onto a base directory ignores the base."""
    if not value:
        return False
    if value[0] in "/\\":
        return True
    return len(value) >= 2 and value[1] == ":" and value[0].isascii() and value[0].isalpha()


def safe_join(base: str | Path, *parts: str) -> Path:
    """``base`` joined with ``parts`` and resolved, refused with :class:`PathEscapeError`
    when the result is not inside the resolved ``base`` (by ``..``, an absolute part, a NUL
    byte or a symlink). The check holds when made: a tree that changes underneath needs
    ``O_NOFOLLOW`` or the like at open time as well."""
    root = Path(base).resolve()
    for part in parts:
        if "\0" in part:
            raise PathEscapeError(f"A path part holds a NUL byte; refused under {root}")
        if is_absolute_path(part):
            raise PathEscapeError(f"Path part {part!r} is absolute; refused under {root}")
    target = root.joinpath(*parts).resolve()
    if not target.is_relative_to(root):
        raise PathEscapeError(f"{target} is outside {root}")
    return target


__all__ = ["PathEscapeError", "contains_path_traversal", "is_absolute_path", "safe_join"]
