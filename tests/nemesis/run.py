"""``make nemesis``: a fleet under a seeded schedule of faults, its clients' history checked.

Three replicas of ``examples/fleet_server.py`` behind nginx on a Redis of their own (AOF
``always``, its data on a tmpfs the nemesis fills), ``--tasks`` tasks and ``--calls`` 2-round
calls started evenly over ``--duration`` seconds while the nemesis (tests/nemesis/nemesis.py)
kills, pauses and restarts replicas, restarts Redis, sets a replica's clock ahead and fills
Redis's disk. Then every fault is healed, the clients are given ``--quiesce`` seconds to see
their tasks end, and the checker (tests/nemesis/checker.py) reads the history and the
side-effect logs. The seed is printed first; the exit status is 1 on any violation::

    python -m tests.nemesis.run --seed 1234 --duration 600 --tasks 1000 --calls 10000
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from deploy.fleet import Fleet
from tests.nemesis.checker import Verdict, check, read_effects
from tests.nemesis.history import History
from tests.nemesis.nemesis import KINDS, Fault, Nemesis, disk_of_its_own, schedule
from tests.nemesis.workload import Workload

REPLICAS = ("fleet-1", "fleet-2", "fleet-3")


@dataclass
class Run:
    seed: int
    duration: float = 600.0
    tasks: int = 1000
    calls: int = 10000
    quiesce: float = 120.0
    kinds: Sequence[str] = KINDS
    redis_disk: str = "1g"
    workdir: Path | None = None
    """Where the fleet, its logs, the side-effect logs and the history go (a new temporary
    directory when ``None``; kept afterwards, for a look at what happened)."""
    say: bool = True

    def replay_command(self) -> str:
        return (
            f"make nemesis SEED={self.seed} DURATION={self.duration:g} TASKS={self.tasks} "
            f"CALLS={self.calls}"
        )

    def print(self, text: str) -> None:
        if self.say:
            print(text, flush=True)


async def execute(run: Run) -> Verdict:
    """The run, from the fleet's start to the checker's verdict."""
    if run.workdir is None:
        run.workdir = Path(tempfile.mkdtemp(prefix="nemesis-"))
    run.print(f"working in {run.workdir}")
    fleet_dir = run.workdir / "fleet"
    kinds = list(run.kinds)
    with contextlib.ExitStack() as stack:
        redis_dir: Path | None = None
        if "disk" in kinds:
            try:
                redis_dir = stack.enter_context(
                    disk_of_its_own(fleet_dir / "redis", run.redis_disk)
                )
            except OSError as exc:
                if os.environ.get("ENGINE_REQUIRE_FAULTS") == "1":
                    raise
                kinds.remove("disk")
                run.kinds = kinds
                run.print(f"no disk faults: {exc} (they need root)")
        faults = schedule(run.seed, run.duration, REPLICAS, kinds)
        run.print(f"schedule ({len(faults)} faults):")
        for fault in faults:
            run.print("  " + fault.describe())
        with Fleet(redis="private", workdir=fleet_dir) as fleet:
            history = History(run.workdir / "history.jsonl")  # its clock starts here
            nemesis = Nemesis(fleet, history, redis_dir)
            workload = Workload(
                fleet.base_url, history, run.seed, run.tasks, run.calls, run.duration
            )
            await _drive(run, nemesis, faults, workload, history)
            effects = read_effects(fleet.effects_dir)
    run.print(f"history: {history.path}; side effects: {fleet_dir / 'effects'}")
    return check(history.ops, effects)


async def _drive(
    run: Run, nemesis: Nemesis, faults: Sequence[Fault], workload: Workload, history: History
) -> None:
    workload_done = anyio.Event()

    async def clients() -> None:
        try:
            await workload.run()
        finally:
            workload_done.set()

    async def progress() -> None:
        while True:
            await anyio.sleep(30)
            seen = Counter(f"{op.f} {op.type}" for op in history.ops if op.type != "invoke")
            run.print(
                f"{history.now():6.0f} s  " + ", ".join(f"{k} {v}" for k, v in sorted(seen.items()))
            )

    async with anyio.create_task_group() as tg:
        tg.start_soon(clients)
        tg.start_soon(progress)
        await nemesis.run(faults)
        await anyio.sleep(max(0.0, run.duration - history.now()))
        await anyio.to_thread.run_sync(nemesis.heal)
        run.print(f"{history.now():6.0f} s  faults over, healed; waiting for the clients")
        with anyio.move_on_after(run.quiesce):
            await workload_done.wait()
        workload.give_up.set()
        await workload_done.wait()
        tg.cancel_scope.cancel()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=None, help="default: a random one")
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of faults")
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=10000)
    parser.add_argument("--quiesce", type=float, default=120.0)
    parser.add_argument("--kinds", default=",".join(KINDS), help="the faults to deal")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    run = Run(
        seed=secrets.randbelow(1_000_000) if args.seed is None else args.seed,
        duration=args.duration,
        tasks=args.tasks,
        calls=args.calls,
        quiesce=args.quiesce,
        kinds=[kind for kind in args.kinds.split(",") if kind],
        workdir=args.workdir,
    )
    unknown = set(run.kinds) - set(KINDS)
    if unknown:
        parser.error(f"unknown fault kinds {sorted(unknown)}: choose from {', '.join(KINDS)}")
    run.print(f"nemesis seed {run.seed}: replay with {run.replay_command()}")
    verdict = anyio.run(execute, run)
    for line in verdict.report():
        run.print(line)
    if not verdict.ok:
        run.print(f"VIOLATIONS found with seed {run.seed}: replay with {run.replay_command()}")
        return 1
    run.print(f"no violation (seed {run.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
