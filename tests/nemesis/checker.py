"""The checker: what a nemesis run's history and side-effect logs say about its promises.

It reads the clients' history (tests/nemesis/history.py) and the side-effect lines every
replica appended (``examples/fleet_server.py``: ``<time> <replica> <kind> <tag> <detail>``),
and finds

- **duplicate once steps**: a task's ``ctx.once`` step (``task-once``, ``task-done``) or a
  call's ``once=True`` resolver (``once``) whose line appears more than once for one tag;
- **lost acknowledged calls**: a call whose final round was answered (``ok``), then sent again
  (``replay``) and answered with anything but the very result the client was first given
  (a round that ran again, a refusal, a question asked anew);
- **unclear tasks**: a task the server acknowledged (the client has its id) that did not end
  ``completed`` with the body's result nor ``failed`` with a message, by the time the run
  gave up on it; and a task ``completed`` whose last ``once`` step left no line;

and measures the **longest stall** (the longest time in which no operation of the clients
succeeded), the slowest task (from its answer to the end the client saw), and what each kind
of fault cost: the longest stall from its start until `AFTER` seconds past its end (or the next
fault), and the requests that failed in transit meanwhile, by what the client saw. A verdict
with any violation is not ``ok``.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from examples.fleet_server import EFFECT_LINE
from tests.nemesis.history import Op

ONCE_KINDS = ("once", "task-once", "task-done")
"""Effect kinds that a ``once`` step records: each must appear at most once per tag."""
AFTER = 20.0
"""Seconds past a fault's end that its cost is counted: a lapsed hold is taken over within a
lease (10 s) and a look at the due index (up to 7.5 s)."""
CLIENT_OPS = ("task", "call", "replay")


@dataclass(frozen=True)
class Effect:
    replica: str
    kind: str
    tag: str


def read_effects(directory: Path) -> list[Effect]:
    """Every effect line of every replica's log under ``directory``."""
    found: list[Effect] = []
    for path in sorted(directory.glob("*.log")) if directory.is_dir() else []:
        for line in path.read_text(errors="replace").splitlines():
            match = EFFECT_LINE.match(line)
            if match is not None:
                found.append(Effect(match["replica"], match["kind"], match["tag"]))
    return found


@dataclass
class Cost:
    """What the faults of one kind cost the clients."""

    times: int = 0
    longest_stall: float = 0.0
    slowest_call: float = 0.0
    """The longest a 2-round call took (both rounds, retries included) among those that ended
    during the faults."""
    slowest_task: float = 0.0
    """The longest from its answer to its end, among the tasks that ended during the faults."""
    errors: Counter[str] = field(default_factory=Counter)
    """Requests that failed in transit during the faults, by what the client saw."""

    def describe(self) -> str:
        seen = ", ".join(f"{why} {n}" for why, n in self.errors.most_common())
        return (
            f"{self.times} times, longest stall {self.longest_stall:.1f} s, "
            f"slowest call {self.slowest_call:.1f} s, slowest task {self.slowest_task:.1f} s, "
            f"requests failed in transit: {sum(self.errors.values())}"
            + (f" ({seen})" if seen else "")
        )


@dataclass
class Verdict:
    duplicates: dict[str, dict[str, int]] = field(default_factory=dict)
    """tag → {once kind: how many times it ran}, for every step that ran more than once."""
    lost: dict[str, str] = field(default_factory=dict)
    """call tag → how its replay differed from its acknowledged result."""
    unclear: dict[str, str] = field(default_factory=dict)
    """task tag → what the client last saw of it."""
    longest_stall: float = 0.0
    stall_at: float = 0.0
    """Seconds into the run the longest stall began."""
    slowest_task: float = 0.0
    counts: Counter[str] = field(default_factory=Counter)
    """What happened, for the report: tasks completed/failed, calls acknowledged, faults..."""
    costs: dict[str, Cost] = field(default_factory=dict)
    """Fault kind → what its faults cost."""

    @property
    def ok(self) -> bool:
        return not (self.duplicates or self.lost or self.unclear)

    def report(self) -> list[str]:
        repeats = sum(runs - 1 for kinds in self.duplicates.values() for runs in kinds.values())
        lines = [
            f"duplicate once steps: {repeats}",
            f"lost acknowledged calls: {len(self.lost)}",
            f"tasks neither completed nor failed clearly: {len(self.unclear)}",
            f"longest stall: {self.longest_stall:.1f} s (from {self.stall_at:.1f} s into the run)",
            f"slowest task (answer to end): {self.slowest_task:.1f} s",
            "counts: " + ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items())),
        ]
        for kind, cost in sorted(self.costs.items()):
            lines.append(f"  {kind}: {cost.describe()}")
        for tag, kinds in sorted(self.duplicates.items())[:20]:
            lines.append(f"  duplicate: {tag} {kinds}")
        for tag, why in sorted(self.lost.items())[:20]:
            lines.append(f"  lost: {tag}: {why}")
        for tag, why in sorted(self.unclear.items())[:20]:
            lines.append(f"  unclear: {tag}: {why}")
        return lines


def check(history: Sequence[Op], effects: Iterable[Effect]) -> Verdict:
    verdict = Verdict()
    effect_counts = Counter((e.kind, e.tag) for e in effects)
    for (kind, tag), runs in effect_counts.items():
        if kind in ONCE_KINDS and runs > 1:
            verdict.duplicates.setdefault(tag, {})[kind] = runs
    _check_calls(history, verdict)
    _check_tasks(history, effect_counts, verdict)
    _measure_stall(history, verdict)
    _measure_costs(history, verdict)
    verdict.counts.update(
        f"fault {op.key}" for op in history if op.f == "fault" and op.type == "invoke"
    )
    return verdict


def _ends(history: Sequence[Op], f: str) -> dict[str, list[Op]]:
    ends: dict[str, list[Op]] = {}
    for op in history:
        if op.f == f and op.type != "invoke":
            ends.setdefault(op.key, []).append(op)
    return ends


def _check_calls(history: Sequence[Op], verdict: Verdict) -> None:
    replays = _ends(history, "replay")
    for tag, ends in _ends(history, "call").items():
        verdict.counts[f"calls {ends[-1].type}"] += 1
        acknowledged = next((op for op in ends if op.type == "ok"), None)
        if acknowledged is None:
            continue
        first: Any = acknowledged.value.get("result")
        for replay in replays.get(tag, []):
            verdict.counts[f"replays {replay.type}"] += 1
            if replay.type == "ok" and replay.value.get("result") != first:
                verdict.lost[tag] = f"replayed as {replay.value.get('result')!r}, was {first!r}"
            elif replay.type == "fail":
                verdict.lost[tag] = f"replay refused: {replay.value.get('error')!r}"


def _check_tasks(
    history: Sequence[Op], effects: Counter[tuple[str, str]], verdict: Verdict
) -> None:
    for tag, ends in _ends(history, "task").items():
        last = ends[-1]
        status = last.value.get("status")
        verdict.counts[f"tasks {status or last.type}"] += 1
        if not last.value.get("task_id"):
            continue  # never acknowledged: the client cannot ask for it
        waited = last.value.get("waited")
        if isinstance(waited, (int, float)):
            verdict.slowest_task = max(verdict.slowest_task, float(waited))
        if last.type == "ok" and status == "completed":
            if f"{tag} done" not in str(last.value.get("text")):
                verdict.unclear[tag] = f"completed with {last.value.get('text')!r}"
            elif effects[("task-done", tag)] == 0:
                verdict.unclear[tag] = "completed, but its done step left no line"
        elif last.type == "fail" and status == "failed" and last.value.get("error"):
            continue
        else:
            verdict.unclear[tag] = f"{last.type}: {last.value!r}"


def _measure_stall(history: Sequence[Op], verdict: Verdict) -> None:
    """The longest gap between successive successes of the clients, from the first invocation
    to the last success."""
    client_ops = [op for op in history if op.f in CLIENT_OPS]
    if not client_ops:
        return
    previous = min(op.time for op in client_ops)
    for at in sorted(op.time for op in client_ops if op.type == "ok"):
        if at - previous > verdict.longest_stall:
            verdict.longest_stall, verdict.stall_at = at - previous, previous
        previous = at


def _measure_costs(history: Sequence[Op], verdict: Verdict) -> None:
    faults = [op for op in history if op.f == "fault" and op.type == "invoke"]
    ended = [op.time for op in history if op.f == "fault" and op.type != "invoke"]
    successes = sorted(op.time for op in history if op.f in CLIENT_OPS and op.type == "ok")
    gaps = list(itertools.pairwise(successes))
    tasks = [
        (op.time, float(op.value["waited"]))
        for op in history
        if op.f == "task" and isinstance(op.value.get("waited"), (int, float))
    ]
    invoked = {op.process: op.time for op in history if op.f == "call" and op.type == "invoke"}
    calls = [
        (op.time, op.time - invoked.get(op.process, op.time))
        for op in history
        if op.f == "call" and op.type != "invoke"
    ]
    for n, fault in enumerate(faults):
        start = fault.time
        end = ended[n] if n < len(ended) else math.inf
        until = min(end + AFTER, faults[n + 1].time if n + 1 < len(faults) else math.inf)
        cost = verdict.costs.setdefault(fault.key, Cost())
        cost.times += 1
        for before, after in gaps:
            if before < until and after > start:
                stall = min(after, until) - max(before, start)
                cost.longest_stall = max(cost.longest_stall, stall)
        for ended_at, took in calls:
            if start <= ended_at < until:
                cost.slowest_call = max(cost.slowest_call, took)
        for ended_at, waited in tasks:
            if start <= ended_at < until:
                cost.slowest_task = max(cost.slowest_task, waited)
        cost.errors.update(
            op.key for op in history if op.f == "transit" and start <= op.time < until
        )
