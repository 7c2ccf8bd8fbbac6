"""A task outlives the replica that ran it: SIGKILLed mid-body, its task is taken over by
another process on the same store once its hold lapses, and what its ``once`` step did is not
done again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from engine.handlers.task_policy import EXTENSION
from engine.state.call import CallState
from engine.state.seal import KeyRing
from engine.store_services.journal_records import open_rounds
from engine.tasks.record_store import TaskRecords
from stores import SQLiteStore
from tests.conftest import KEY
from tests.fleet_helpers import ROOT, free_port
from tests.http_helpers import assert_result, post, request

SERVER = "tests/tasks/takeover_server.py"
TASKS = {"extensions": {EXTENSION: {}}}


class Replica:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self.log = log
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "engine", "serve", SERVER, "--port", str(self.port)],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(f"{self.url}/healthz", timeout=1).raise_for_status()
                return
            except httpx.HTTPError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(log.read_text()) from None
                time.sleep(0.1)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


@pytest.fixture
def setting(tmp_path: Path) -> Iterator[dict[str, Any]]:
    env = dict(os.environ)
    env.update(
        ENGINE_KEYS=KEY,
        ENGINE_STORE=f"sqlite:///{tmp_path / 'tasks.db'}",
        TASK_EFFECTS=str(tmp_path / "effects.txt"),
        TASK_NAP="3",
        PYTHONPATH=str(ROOT),
    )
    started: list[Replica] = []

    def replica() -> Replica:
        started.append(Replica(env, tmp_path / f"replica-{len(started)}.log"))
        return started[-1]

    yield {"replica": replica, "effects": tmp_path / "effects.txt", "db": tmp_path / "tasks.db"}
    for one in started:
        one.stop()


async def checkpointed(db: Path, task_id: str) -> bool:
    """Whether the task's record holds its ``once`` step: the body has gone past it."""
    store = SQLiteStore(db)
    try:
        record = await TaskRecords(store, keys=KeyRing([KEY])).load(task_id)
    finally:
        await store.aclose()
    return record is not None and bool(CallState.decode(record.state).checkpoints)


def effects(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def journaled(db: Path, call_id: str, event: tuple[int, str]) -> None:
    """Wait until the journal holds ``(round, kind)`` for the call: the journal is written
    after a round answers, so a replica killed at once may not have written it yet."""
    store = SQLiteStore(db)
    try:
        with anyio.fail_after(10):
            while True:
                records = await store.events(call_id)
                rounds = [r for e in records for r in open_rounds(e, KeyRing([KEY]))]
                if event in [(r["round"], r["kind"]) for r in rounds]:
                    return
                await anyio.sleep(0.05)
    finally:
        await store.aclose()


@pytest.mark.anyio
async def test_a_killed_replicas_task_is_finished_by_another_process(
    setting: dict[str, Any],
) -> None:
    first, second = setting["replica"](), setting["replica"]()
    async with first.client() as a, second.client() as b:
        made = assert_result(
            await post(
                a,
                request(
                    "tools/call", {"name": "slow_once", "arguments": {"n": 4}}, capabilities=TASKS
                ),
            )
        )
        task_id = made["taskId"]
        deadline = time.monotonic() + 10
        while not await checkpointed(setting["db"], task_id):  # the body naps now
            assert time.monotonic() < deadline, first.log.read_text()
            await anyio.sleep(0.05)
        assert effects(setting["effects"]) == [f"{task_id} 4"]
        await journaled(setting["db"], task_id, (1, "task"))  # written after the answer
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(5)

        seen: list[str] = []
        deadline = time.monotonic() + 20
        while True:
            get = request("tasks/get", {"taskId": task_id}, capabilities=TASKS)
            task = assert_result(await post(b, get))
            seen.append(task["status"])
            if task["status"] != "working":
                break
            assert time.monotonic() < deadline, second.log.read_text()
            await anyio.sleep(0.1)
    assert task["status"] == "completed", task
    assert task["result"]["content"][0]["text"] == "4 became 40"
    assert effects(setting["effects"]) == [f"{task_id} 4"]  # the once step did not run again

    await journaled(setting["db"], task_id, (2, "complete"))  # written after the status
    store = SQLiteStore(setting["db"])
    try:
        events = await store.events(task_id)
    finally:
        await store.aclose()
    rounds = [r for event in events for r in open_rounds(event, KeyRing([KEY]))]
    kinds = [(r["round"], r["kind"]) for r in rounds]
    assert kinds == [(1, "task"), (2, "complete")]  # the killed run journaled nothing


@pytest.mark.anyio
async def test_a_replica_paused_past_its_lease_does_not_run_the_step_its_successor_runs(
    setting: dict[str, Any],
) -> None:
    """SIGSTOP while the body naps, for three leases: another process takes the task over;
    resumed, the paused one reaches the ``once`` step first, and stops there."""
    first, second = setting["replica"](), setting["replica"]()
    naps = Path(str(setting["effects"]) + ".naps")
    async with first.client() as a, second.client() as b:
        call = request(
            "tools/call", {"name": "nap_then_once", "arguments": {"n": 7}}, capabilities=TASKS
        )
        task_id = assert_result(await post(a, call))["taskId"]
        deadline = time.monotonic() + 10
        while effects(naps) == []:  # the body naps now
            assert time.monotonic() < deadline, first.log.read_text()
            await anyio.sleep(0.02)
        first.process.send_signal(signal.SIGSTOP)
        try:
            deadline = time.monotonic() + 10
            while len(effects(naps)) < 2:  # the second process took the task over
                assert time.monotonic() < deadline, second.log.read_text()
                await anyio.sleep(0.05)
        finally:
            first.process.send_signal(signal.SIGCONT)  # its nap is over: the step is next
        deadline = time.monotonic() + 20
        while True:
            get = request("tasks/get", {"taskId": task_id}, capabilities=TASKS)
            task = assert_result(await post(b, get))
            if task["status"] != "working":
                break
            assert time.monotonic() < deadline, second.log.read_text()
            await anyio.sleep(0.1)
    assert task["status"] == "completed", task
    assert [line.split()[:2] for line in effects(setting["effects"])] == [[task_id, "7"]]
    (ran,) = effects(setting["effects"])
    assert ran.split()[2] == str(second.process.pid)  # the successor ran it, the paused one not
    # Resumed, it learns it lost the task from its own clock before the step, or from the
    # store when its renewal (due at once) comes first: either way the step did not run there.
    told = first.log.read_text()
    assert "does not run here, and the run stops" in told or "is another run's now" in told
