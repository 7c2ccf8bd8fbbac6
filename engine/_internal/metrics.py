"""Counters and histograms an operator scrapes from ``/metrics``, in the Prometheus text
exposition format.

The format is a few lines of text; a client library would add a dependency for what the engine
needs of it (counters, two histograms with fixed buckets, no push gateway).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine._internal.tracing import StoreSpans

_HELP = {
    "engine_rounds_total": "Rounds served, by method and outcome.",
    "engine_calls_completed_total": "Calls that reached a final result.",
    "engine_duplicates_served_total": "Retries answered with an earlier attempt's response.",
    "engine_state_spills_total": "Rounds whose state went to the store by reference.",
    "engine_token_rejections_total": "requestState tokens refused, by reason.",
    "engine_auth_refusals_total": "Requests refused for their bearer token, by reason.",
    "engine_auth_limits_total": (
        "Requests answered 503 without asking the authorization server, by the limit hit."
    ),
    "engine_store_errors_total": "Store operations that failed because the store was unavailable.",
    "engine_journal_events_dropped_total": (
        "Journal events dropped: the writers were behind, or the store refused them."
    ),
    "engine_journal_calls_purged_total": (
        "Journaled calls purged, the oldest first, to keep the journal within journal_max_bytes."
    ),
    "engine_task_runs_total": "Runs of task bodies that ended here, by the status they left.",
    "engine_task_takeovers_total": "Tasks taken over here after their replica's hold lapsed.",
    "engine_task_holds_lost_total": "Task runs stopped here: cancelled, expired or taken over.",
    "engine_budget_refusals_total": (
        "Requests refused at a budget of their principal or of the replica, by the setting."
    ),
}


Key = tuple[str, tuple[tuple[str, str], ...]]

ROUND_SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Bucket bounds of ``engine_round_duration_seconds``: from a round of the engine alone to one
waiting on a slow resolver or a 2025-11-25 answer."""
STORE_SECONDS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.0)
"""Bucket bounds of ``engine_store_operation_duration_seconds``: from a local SQLite commit or
a Redis script on the same host to the operation timeout."""
_HISTOGRAMS = {
    "engine_round_duration_seconds": "Time to serve a round, by method and outcome.",
    "engine_store_operation_duration_seconds": "Time a store operation took, by operation.",
}


class Histogram:
    """Counts of observations per bucket (not cumulative: that is done when scraped)."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.total += seconds

    @property
    def count(self) -> int:
        return sum(self.counts)

    def lines(self, name: str, labels: str) -> list[str]:
        sep = "," if labels else ""
        lines: list[str] = []
        running = 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += n
            le = "+Inf" if bound == float("inf") else repr(bound)
            lines.append(f'{name}_bucket{{{labels}{sep}le="{le}"}} {running}')
        braces = f"{{{labels}}}" if labels else ""
        lines.append(f"{name}_sum{braces} {self.total!r}")
        lines.append(f"{name}_count{braces} {running}")
        return lines


class Metrics:
    """Monotonic counters with labels; cheap enough to bump on every round."""

    def __init__(self) -> None:
        self._counts: Counter[Key] = Counter()
        self._rounds: dict[tuple[str, str], Histogram] = {}
        """Round durations by (method, outcome): observed on every request, so kept apart from
        the labelled counters; ``engine_rounds_total``, completions and duplicates are counted
        from them when scraped."""
        self._store: dict[str, Histogram] = {}
        self.store_spans: StoreSpans | None = None
        """Where store operations also become spans, once the server traces."""
        self.gauges: list[Callable[[], list[str]]] = []
        """Lines of gauges measured elsewhere (the store clock's skew), read when scraped."""

    def inc(self, name: str, **labels: str) -> None:
        """Count one; call sites pass labels in a fixed order, so they are not sorted here."""
        self._counts[(name, tuple(labels.items()))] += 1

    def add(self, name: str, count: int, **labels: str) -> None:
        """Count ``count`` at once."""
        self._counts[(name, tuple(labels.items()))] += count

    def round_served(self, method: str, outcome: str, seconds: float) -> None:
        """One round, and how long it took to serve."""
        key = (method, outcome)
        histogram = self._rounds.get(key)
        if histogram is None:
            histogram = self._rounds[key] = Histogram(ROUND_SECONDS)
        histogram.observe(seconds)

    def store_operation(self, operation: str, seconds: float, links: Sequence[Any] = ()) -> None:
        """How long one store operation (``claim``, ``complete``, ``spill``, ...) took;
        ``links`` name the rounds a write batched across calls was for (from
        :meth:`trace_link`)."""
        histogram = self._store.get(operation)
        if histogram is None:
            histogram = self._store[operation] = Histogram(STORE_SECONDS)
        histogram.observe(seconds)
        spans = self.store_spans
        if spans is not None:
            spans.store_operation(operation, seconds, links)

    def trace_link(self) -> Any:
        """The current round's span, for a write done later for it to link to (``None``: not
        traced)."""
        spans = self.store_spans
        return None if spans is None else spans.current_link()

    def _all(self) -> Counter[Key]:
        counts = Counter(self._counts)
        for (method, outcome), histogram in list(self._rounds.items()):
            n = histogram.count
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
        families = {
            "engine_round_duration_seconds": [
                (f'method="{_escape(method)}",outcome="{_escape(outcome)}"', histogram)
                for (method, outcome), histogram in sorted(self._rounds.items())
            ],
            "engine_store_operation_duration_seconds": [
                (f'operation="{_escape(operation)}"', histogram)
                for operation, histogram in sorted(self._store.items())
            ],
        }
        for name, histograms in families.items():
            lines.append(f"# HELP {name} {_HISTOGRAMS[name]}")
            lines.append(f"# TYPE {name} histogram")
            for label_text, histogram in histograms:
                lines.extend(histogram.lines(name, label_text))
        for gauge in self.gauges:
            lines.extend(gauge())
        lines.extend(extra)
        return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def reason_label(reason: str) -> str:
    """The stable part of a rejection reason (``request binding: arguments`` → its head)."""
    return reason.split(":", 1)[0].strip() or "unknown"
