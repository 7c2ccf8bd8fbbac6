"""What the fault tests share: tasks of the fleet server's ``job`` tool, made, answered, waited
for (through faults: a request that fails is sent again), and the side-effect logs that count
each ``once`` step.

``job(tag, seconds)`` places a hold (``ctx.once``: a ``task-once`` line), asks to go on, works
for ``seconds``, then records ``task-done`` (``ctx.once``), each line appended to the log of
the replica that ran it."""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx

from deploy.fleet import Fleet
from engine.handlers.task_policy import EXTENSION
from examples.fleet_server import read_effects
from tests.http_helpers import post, request

CAPABILITIES: dict[str, Any] = {"extensions": {EXTENSION: {}}, "elicitation": {}}
GO = {"action": "accept", "content": {"go": True}}
ENDED = {"completed", "failed", "cancelled"}
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return request(method, params, capabilities=CAPABILITIES)


async def result_of(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any] | None:
    """The request's result, or ``None`` when it failed (the store away, a replica paused)."""
    try:
        response = await post(client, body)
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    message = response.json()
    found: dict[str, Any] | None = message.get("result")
    return found


@dataclass
class Jobs:
    """Tasks of ``job`` made on one fleet, by tag."""

    fleet: Fleet
    ids: dict[str, str] = field(default_factory=dict)
    ended: dict[str, dict[str, Any]] = field(default_factory=dict)
    took: dict[str, float] = field(default_factory=dict)
    """Seconds from the answer that started each body to the task's end, as polled."""
    _answered: dict[str, float] = field(default_factory=dict)

    async def start(self, client: httpx.AsyncClient, tag: str, seconds: float) -> None:
        """Make the task and answer its question on ``client``'s replica: its body runs there."""
        call = rpc("tools/call", {"name": "job", "arguments": {"tag": tag, "seconds": seconds}})
        made = await result_of(client, call)
        assert made is not None and made["resultType"] == "task", made
        task_id = self.ids[tag] = made["taskId"]
        with anyio.fail_after(30):
            while True:
                task = await result_of(client, rpc("tasks/get", {"taskId": task_id}))
                if task is not None and task["status"] == "input_required":
                    break
                await anyio.sleep(0.05)
        (key,) = task["inputRequests"]
        update = rpc("tasks/update", {"taskId": task_id, "inputResponses": {key: GO}})
        assert await result_of(client, update) is not None
        self._answered[tag] = time.monotonic()

    async def wait_ended(self, client: httpx.AsyncClient, seconds: float) -> None:
        """Poll every task until it ends, through whatever fails meanwhile."""
        with anyio.fail_after(seconds):
            while len(self.ended) < len(self.ids):
                for tag, task_id in self.ids.items():
                    if tag in self.ended:
                        continue
                    task = await result_of(client, rpc("tasks/get", {"taskId": task_id}))
                    if task is not None and task["status"] in ENDED:
                        self.ended[tag] = task
                        self.took[tag] = time.monotonic() - self._answered[tag]
                await anyio.sleep(0.2)

    def effects(self) -> dict[str, dict[str, int]]:
        """How often each task's ``once`` steps ran, from the replicas' side-effect logs."""
        found = read_effects(self.fleet.effects_dir, "")
        return {"task-once": found.task_once, "task-done": found.task_done}

    def finished_on(self, tag: str) -> str:
        """The replica whose body finished the task (from its result)."""
        text: str = self.ended[tag]["result"]["content"][0]["text"]
        return text.rsplit("finished on ", 1)[1].rstrip(")")


def libfaketime() -> Path:
    """libfaketime, from Debian's ``faketime`` package, installed when missing (as root)."""
    if not LIBFAKETIME.exists() and shutil.which("apt-get") is not None:
        install = ["apt-get", "install", "-y", "-qq", "faketime"]
        if subprocess.run(install, capture_output=True).returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True)
            subprocess.run(install, capture_output=True)
    if not LIBFAKETIME.exists():
        raise RuntimeError(f"{LIBFAKETIME} is missing: apt-get install -y faketime")
    return LIBFAKETIME


def clock_ahead(seconds: int) -> dict[str, str]:
    """The environment of a process whose wall clock runs ``seconds`` ahead (its monotonic
    clock left alone, as NTP leaves it)."""
    return {
        "LD_PRELOAD": str(libfaketime()),
        "FAKETIME": f"+{seconds}s",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "FAKETIME_NO_CACHE": "1",
    }
