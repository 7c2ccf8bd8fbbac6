"""A run's history, as the clients saw it: each operation's invocation and its end, with times.

An operation is invoked once and ends once, as ``ok`` (it took effect, and the client knows it),
``fail`` (it did not take effect: the server said so plainly) or ``info`` (the client cannot
tell: a timeout, a dropped connection, a 502). The nemesis records its faults in the same
history (``f`` = ``fault``). One JSON object a line, appended as it happens, so a run that is
killed leaves what it saw.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

Kind = Literal["invoke", "ok", "fail", "info"]


@dataclass(frozen=True)
class Op:
    process: str
    """Who did it: ``task-12``, ``call-7``, ``nemesis``."""
    type: Kind
    f: str
    """What: ``task``, ``call``, ``replay`` (an acknowledged round sent again), ``fault``."""
    key: str
    """The tag it concerns: a task's or a call's, or the fault's name."""
    time: float
    """Seconds since the run began."""
    value: dict[str, Any] = field(default_factory=dict)


@dataclass
class History:
    """The operations of one run, kept in memory and appended to ``path``."""

    path: Path | None = None
    ops: list[Op] = field(default_factory=list)
    began: float = field(default_factory=time.monotonic)

    def now(self) -> float:
        return round(time.monotonic() - self.began, 3)

    def add(self, process: str, kind: Kind, f: str, key: str, **value: Any) -> Op:
        op = Op(process, kind, f, key, self.now(), value)
        self.ops.append(op)
        if self.path is not None:
            with self.path.open("a") as out:
                out.write(json.dumps(asdict(op), sort_keys=True) + "\n")
        return op


def load(path: Path) -> list[Op]:
    """The operations written to ``path``, in order."""
    ops: list[Op] = []
    for line in path.read_text().splitlines():
        if line.strip():
            fields = json.loads(line)
            ops.append(Op(**fields))
    return ops
