"""Argument checks shared by every store, so a bad call fails the same way on each backend."""

from __future__ import annotations

import math
from typing import Any

from .base import TaskRow


def check_call_id(call_id: str) -> None:
    """Call ids name every key of a call; an empty one would merge unrelated calls."""
    if not isinstance(call_id, str) or not call_id:
        raise ValueError(f"call_id must be a non-empty string, got {call_id!r}")


def check_ttl(ttl: float, name: str = "ttl") -> None:
    """A zero, negative or infinite TTL is always a caller bug: say so before storing."""
    if not isinstance(ttl, (int, float)) or not math.isfinite(ttl) or ttl <= 0:
        raise ValueError(f"{name} must be a positive number of seconds, got {ttl!r}")


def check_limit(limit: int) -> None:
    """Listing limits are positive: an unbounded listing is never what a debugger wants."""
    if not isinstance(limit, int) or limit <= 0:
        raise ValueError(f"limit must be a positive integer, got {limit!r}")


def check_round(round_no: int) -> None:
    """Round numbers are keys; a bool or negative number is a caller bug."""
    if not isinstance(round_no, int) or isinstance(round_no, bool) or round_no < 0:
        raise ValueError(f"round_no must be a non-negative integer, got {round_no!r}")


def check_owner(owner: bytes | None) -> bytes | None:
    """An owner token is non-empty bytes (empty would read as "no owner" on Redis), or None."""
    if owner is None:
        return None
    if isinstance(owner, bytes | bytearray | memoryview) and len(data := bytes(owner)) > 0:
        return data
    raise ValueError(f"owner must be non-empty bytes or None, got {owner!r}")


def check_round_key(call_id: str, round_no: int) -> None:
    """Every round operation names its round the same way, so each checks both parts."""
    check_call_id(call_id)
    check_round(round_no)


def check_round_op(
    call_id: str, round_no: int, ttl: float, owner: bytes | None = None
) -> bytes | None:
    """`check_round_key`, `check_ttl` and `check_owner` in one call, for the operations that
    keep a round for `ttl` (claim, complete, renew): the owner as bytes, or None.

    A claim and a completion run on every resumed round, so the usual arguments pass one test,
    and anything else goes through the full checks (which raise the precise error, or accept an
    unusual valid type)."""
    if (
        type(call_id) is not str
        or not call_id
        or type(round_no) is not int
        or round_no < 0
        or (type(ttl) is not float and type(ttl) is not int)
        or not 0 < ttl < math.inf
    ):
        check_round_key(call_id, round_no)
        check_ttl(ttl)
    if owner is None or (type(owner) is bytes and owner):
        return owner
    return check_owner(owner)


def check_task_id(task_id: str) -> None:
    """Task ids name a task's keys, as call ids do: a non-empty string."""
    if not isinstance(task_id, str) or not task_id:
        raise ValueError(f"task_id must be a non-empty string, got {task_id!r}")


def check_task_write(row: Any, ttl: float, due_in: float | None) -> None:
    """What `Store.put_task` is given: a `TaskRow` of a positive version and a fence, a TTL,
    and when the task is due, if it is."""
    if not isinstance(row, TaskRow):
        raise TypeError(f"put_task takes a TaskRow, got {type(row).__name__}")
    check_task_id(row.task_id)
    if not isinstance(row.version, int) or isinstance(row.version, bool) or row.version < 1:
        raise ValueError(f"a task's version is a positive integer, got {row.version!r}")
    check_fence(row.fence)
    check_ttl(ttl)
    if due_in is not None:
        check_lease(due_in, "due_in")


SYNCHRONOUS = ("normal", "full")
"""How a commit reaches the disk (``PRAGMA synchronous``). ``normal``: the log is synced at
checkpoints only, so a commit survives a crash of the process but not of the machine (a power
loss, an OS crash); ``full``: each commit syncs the log before it returns, so it survives both."""


def check_synchronous(value: object) -> str:
    """``value`` as one of `SYNCHRONOUS` (any case), or a ValueError saying what to give."""
    mode = value.lower() if isinstance(value, str) else value
    if mode not in SYNCHRONOUS:
        raise ValueError(
            f"synchronous must be 'normal' (commits survive a crash of the process) or 'full' "
            f"(they survive a power loss too), got {value!r}"
        )
    return str(mode)


def check_fence(fence: int) -> None:
    if not isinstance(fence, int) or isinstance(fence, bool) or fence < 0:
        raise ValueError(f"a task's fence is a non-negative integer, got {fence!r}")


def check_lease(seconds: float, name: str = "lease") -> None:
    """A lease (or a due time from now) is finite and not negative; 0 means now."""
    if not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{name} must be a non-negative number of seconds, got {seconds!r}")
