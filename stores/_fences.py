"""Whether a task write's fence lets it land, decided alike by the stores that decide it in
Python (memory and SQLite; Redis decides in its task script).

A task's fence is the fencing token of its hold: it goes up by one each time a run takes the
task. A write carrying a lower fence comes from a run whose hold was taken over: refused. A
write carrying a higher fence takes the hold: it lands only when no hold is live, that is when
the stored task is not due later than now on the store's clock (a due time is when a hold
lapses), so two runs never both hold a task, whatever their own clocks say.
"""

from __future__ import annotations


def fence_allows(stored_fence: int, stored_due: float | None, now: float, fence: int) -> bool:
    """Whether a write with ``fence`` may replace a live task whose fence is ``stored_fence``
    and which is due at ``stored_due`` (``None``: not due, no hold), at ``now``."""
    if fence < stored_fence:
        return False
    return fence == stored_fence or stored_due is None or stored_due <= now


def seconds_until(due: float | None, now: float) -> float | None:
    """Seconds from ``now`` until ``due``, as `stores.TaskRow.due_in` tells it."""
    return None if due is None else due - now
