"""The nemesis: a seeded schedule of faults, and the hand that deals them to a fleet.

`schedule` turns a seed into a list of faults, one after the other with quiet gaps between:
the first few take every kind once (in an order the seed picks), so even a short run meets
each of them; then kinds, targets and lengths are drawn at random. The same seed, duration and
kinds give the same schedule, so a run that found something can be run again.

The faults, on a fleet of three replicas behind nginx on a Redis with AOF ``always``:

- ``kill``: a replica is SIGKILLed, and started again ``seconds`` later;
- ``pause``: a replica is SIGSTOPped for ``seconds`` (past a lease, at times), then SIGCONTed;
- ``redis``: Redis is SIGKILLed, and started again ``seconds`` later from its AOF;
- ``skew``: a replica is stopped (SIGTERM, it gives its tasks back) and started again with its
  wall clock 30 s or 90 s ahead (libfaketime) for ``seconds``, then with its own again;
- ``disk``: Redis's data directory (a tmpfs of its own) is filled; Redis, which cannot keep an
  AOF ``always`` promise on a full disk, exits at its next write; ``seconds`` later the filler
  is removed, as an operator makes room, and Redis is started again.
"""

from __future__ import annotations

import contextlib
import random
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from deploy.fleet import Fleet
from tests.faults.store_harness import fill
from tests.faults.tasks import clock_ahead
from tests.nemesis.history import History

KINDS = ("kill", "pause", "redis", "skew", "disk")
WEIGHTS = {"kill": 3, "pause": 3, "redis": 2, "skew": 1, "disk": 1}
LENGTHS = {
    "kill": (1.0, 5.0),
    "pause": (2.0, 20.0),
    "redis": (1.0, 5.0),
    "skew": (15.0, 45.0),
    "disk": (2.0, 8.0),
}
"""The range of each kind's ``seconds``; a pause crosses the 10 s lease about half the time."""
GAP = (3.0, 12.0)
"""Seconds of quiet between two faults."""
WARMUP = 5.0


@dataclass(frozen=True)
class Fault:
    at: float
    """Seconds into the run it begins."""
    kind: str
    target: str
    """A replica's name, or ``redis``."""
    seconds: float
    ahead: int = 0
    """For ``skew``: how far ahead the replica's clock is set."""

    def describe(self) -> str:
        extra = f" +{self.ahead}s" if self.ahead else ""
        return f"{self.at:7.1f} s  {self.kind:<5} {self.target}{extra} for {self.seconds:.1f} s"


def schedule(
    seed: int, duration: float, replicas: Sequence[str], kinds: Sequence[str] = KINDS
) -> list[Fault]:
    """The faults of a run of ``duration`` seconds, drawn from ``seed``."""
    draw = random.Random(seed)
    first = list(kinds)
    draw.shuffle(first)
    faults: list[Fault] = []
    at = WARMUP
    while True:
        if first:  # every kind once, short, so that even a short run meets each
            kind = first.pop(0)
            low, high = LENGTHS[kind]
            seconds = round(draw.uniform(low, (low + high) / 2), 1)
            gap = draw.uniform(GAP[0], (GAP[0] + GAP[1]) / 3)
        else:
            kind = draw.choices(kinds, [WEIGHTS[k] for k in kinds])[0]
            seconds = round(draw.uniform(*LENGTHS[kind]), 1)
            gap = draw.uniform(*GAP)
        target = "redis" if kind in ("redis", "disk") else draw.choice(list(replicas))
        ahead = draw.choice((30, 90)) if kind == "skew" else 0
        if at + seconds > duration:
            return faults
        faults.append(Fault(round(at, 1), kind, target, seconds, ahead))
        at += seconds + gap


@dataclass
class Nemesis:
    """Deals `Fault`\\s to ``fleet`` on time, each recorded in ``history``; ``disk`` needs the
    fleet's Redis directory to be a filesystem of its own (``redis_dir``)."""

    fleet: Fleet
    history: History
    redis_dir: Path | None = None

    async def run(self, faults: Sequence[Fault]) -> None:
        """Deal every fault in turn; cancelled, it heals the one under way first."""
        for fault in faults:
            await anyio.sleep(max(0.0, fault.at - self.history.now()))
            self.history.add(
                "nemesis",
                "invoke",
                "fault",
                fault.kind,
                target=fault.target,
                seconds=fault.seconds,
                ahead=fault.ahead,
            )
            with anyio.CancelScope(shield=True):
                seen = await self._deal(fault)
            self.history.add("nemesis", "ok", "fault", fault.kind, target=fault.target, seen=seen)

    async def _deal(self, fault: Fault) -> str:
        """Deal ``fault`` and heal it; what was seen meanwhile, for the history."""
        if fault.kind == "kill":
            replica = self.fleet.replicas[fault.target]
            replica.signal(signal.SIGKILL)
            await anyio.to_thread.run_sync(replica.wait, 10)
            await anyio.sleep(fault.seconds)
            self.fleet.start_replica(fault.target, wait=False)
        elif fault.kind == "pause":
            replica = self.fleet.replicas[fault.target]
            replica.signal(signal.SIGSTOP)
            try:
                await anyio.sleep(fault.seconds)
            finally:
                replica.signal(signal.SIGCONT)
        elif fault.kind == "redis":
            self.fleet.kill_redis()
            await anyio.sleep(fault.seconds)
            await anyio.to_thread.run_sync(self.fleet.start_redis)
        elif fault.kind == "skew":
            await self._restart(fault.target, clock_ahead(fault.ahead))
            await anyio.sleep(fault.seconds)
            await self._restart(fault.target, {})
        elif fault.kind == "disk":
            return await self._fill_redis_disk(fault.seconds)
        return ""

    async def _restart(self, name: str, env: Mapping[str, str]) -> None:
        """Stop the replica as a deploy does (SIGTERM: it drains and gives its tasks back) and
        start it again with ``env`` added."""
        replica = self.fleet.replicas[name]
        assert replica.process is not None
        replica.signal(signal.SIGTERM)
        try:
            await anyio.to_thread.run_sync(replica.wait, 30)
        except subprocess.TimeoutExpired:
            replica.signal(signal.SIGKILL)
            await anyio.to_thread.run_sync(replica.wait, 10)
        envs = dict(self.fleet.replica_envs)
        envs[name] = dict(env)
        self.fleet.replica_envs = envs
        self.fleet.start_replica(name, wait=False)

    async def _fill_redis_disk(self, seconds: float) -> str:
        assert self.redis_dir is not None, "a disk fault needs Redis on a filesystem of its own"
        ballast = await anyio.to_thread.run_sync(fill, self.redis_dir)
        try:
            await anyio.sleep(seconds)
        finally:
            ballast.unlink()
        redis = self.fleet.private_redis
        assert redis is not None
        assert redis.process is not None
        exited = redis.process.poll()
        if exited is None:
            return "Redis did not write while its disk was full"
        redis.process = None  # it exited on the full disk: it cannot keep AOF always
        await anyio.to_thread.run_sync(self.fleet.start_redis)
        return f"Redis exited with status {exited} on its full disk, started again"

    def heal(self) -> None:
        """Everything as it should be: every replica running, Redis up, no ballast left."""
        if self.redis_dir is not None:
            for ballast in self.redis_dir.glob("ballast*"):
                ballast.unlink()
        redis = self.fleet.private_redis
        if redis is not None and (redis.process is None or redis.process.poll() is not None):
            redis.process = None
            self.fleet.start_redis()
        for name, replica in self.fleet.replicas.items():
            if replica.alive():
                replica.signal(signal.SIGCONT)
            else:
                self.fleet.start_replica(name, wait=False)


@contextlib.contextmanager
def disk_of_its_own(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``512m``) mounted at ``path`` for the block: Redis's data directory,
    which ``disk`` fills. `OSError` where mounting is not allowed (not root)."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        raise OSError(mounted.stderr.strip() or f"cannot mount a tmpfs at {path}")
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)
