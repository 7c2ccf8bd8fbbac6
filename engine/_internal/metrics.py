"""Counters an operator scrapes from ``/metrics``, in the Prometheus text exposition format.

The format is a few lines of text; a client library would add a dependency for nothing the
engine needs (no histograms, no push gateway).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

_HELP = {
    "engine_rounds_total": "Rounds served, by method and outcome.",
    "engine_calls_completed_total": "Calls that reached a final result.",
    "engine_duplicates_served_total": "Retries answered with an earlier attempt's response.",
    "engine_state_spills_total": "Rounds whose state went to the store by reference.",
    "engine_token_rejections_total": "requestState tokens refused, by reason.",
    "engine_auth_refusals_total": "Requests refused for their bearer token, by reason.",
    "engine_store_errors_total": "Store operations that failed because the store was unavailable.",
    "engine_journal_events_dropped_total": "Journal events dropped: the writers were behind.",
    "engine_task_runs_total": "Runs of task bodies that ended here, by the status they left.",
    "engine_task_takeovers_total": "Tasks taken over here after their replica's hold lapsed.",
    "engine_task_holds_lost_total": "Task runs stopped here: cancelled, expired or taken over.",
}


Key = tuple[str, tuple[tuple[str, str], ...]]


class Metrics:
    """Monotonic counters with labels; cheap enough to bump on every round."""

    def __init__(self) -> None:
        self._counts: Counter[Key] = Counter()
        self._rounds: dict[tuple[str, str], int] = {}
        """``engine_rounds_total`` by (method, outcome): bumped on every request, so kept apart
        from the labelled counters; completions and duplicates are derived from it."""

    def inc(self, name: str, **labels: str) -> None:
        """Count one; call sites pass labels in a fixed order, so they are not sorted here."""
        self._counts[(name, tuple(labels.items()))] += 1

    def round_served(self, method: str, outcome: str) -> None:
        """Count one round; completed calls and duplicates are counted from these when
        scraped."""
        rounds = self._rounds
        key = (method, outcome)
        rounds[key] = rounds.get(key, 0) + 1

    def _all(self) -> Counter[Key]:
        counts = Counter(self._counts)
        for (method, outcome), n in list(self._rounds.items()):
            counts[("engine_rounds_total", (("method", method), ("outcome", outcome)))] += n
            if outcome == "cached":
                counts[("engine_duplicates_served_total", ())] += n
            elif outcome not in ("input_required", "task"):  # a task completes later
                counts[("engine_calls_completed_total", ())] += n
        return counts

    def value(self, name: str, **labels: str) -> int:
        return self._all()[(name, tuple(labels.items()))]

    def exposition(self, extra: Iterable[str] = ()) -> str:
        lines: list[str] = []
        counts = self._all()
        for name, text in _HELP.items():
            lines.append(f"# HELP {name} {text}")
            lines.append(f"# TYPE {name} counter")
            samples = [(labels, n) for (metric, labels), n in counts.items() if metric == name]
            if not samples:
                lines.append(f"{name} 0")
            for labels, n in sorted(samples):
                rendered = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
                lines.append(f"{name}{{{rendered}}} {n}" if rendered else f"{name} {n}")
        lines.extend(extra)
        return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def reason_label(reason: str) -> str:
    """The stable part of a rejection reason (``request binding: arguments`` → its head)."""
    return reason.split(":", 1)[0].strip() or "unknown"
