"""A task in the journal: the rounds of its call, shown and replayed like any call's."""

from __future__ import annotations

from typing import Annotated

import anyio
import pytest

from engine import MCPServer, Resolve
from engine.debug.journal import load_call
from engine.debug.render import timeline
from engine.debug.replay import replay_call
from engine.testing import Client
from stores import MemoryStore
from tests.conftest import KEY
from tests.tasks.test_task_lifecycle import Confirm, Jobs, confirm_start, until_status, yes

pytestmark = pytest.mark.anyio


async def test_a_task_replays_round_by_round() -> None:
    store = MemoryStore()
    jobs = Jobs(store)
    async with Client(jobs.mcp, tasks=True, elicitation=yes) as client:
        result = await client.call_tool("report", {"pages": 7})
    assert result.task_id is not None
    call = await load_call(store, result.task_id, keys=[KEY])
    assert [(r.round, r.kind) for r in call.rounds] == [
        (1, "task"),
        (2, "input_required"),
        (3, "complete"),
    ]
    assert call.rounds[1].checkpoints  # the once step, taken in the task's first run
    assert call.rounds[2].answers  # the answer given with tasks/update

    report = await replay_call(Jobs(MemoryStore()).mcp, call)
    assert report.ok, report.render()
    assert [check.live_kind for check in report.rounds] == ["task", "input_required", "complete"]

    shown = timeline(call)
    assert "→ task" in shown and "task    made: the body runs" in shown
    assert "result  7 pages, sent" in shown


async def test_replay_finds_a_task_whose_code_changed() -> None:
    store = MemoryStore()
    async with Client(Jobs(store).mcp, tasks=True, elicitation=yes) as client:
        result = await client.call_tool("guarded")
    assert result.task_id is not None
    call = await load_call(store, result.task_id, keys=[KEY])
    assert [r.kind for r in call.rounds] == ["input_required", "task", "complete"]

    changed = MCPServer("jobs", keys=[KEY])

    @changed.tool(task="required")
    def guarded(go: Annotated[Confirm, Resolve(confirm_start)]) -> str:
        return "started, differently"

    report = await replay_call(changed, call)
    assert not report.ok
    assert report.divergence is not None and report.divergence.round == 3
    assert report.divergence.what == "result"


async def test_a_cancelled_task_is_journaled_and_replays_up_to_the_cancel() -> None:
    store = MemoryStore()
    jobs = Jobs(store)
    async with Client(jobs.mcp, tasks=True) as client:
        task_id = (await client.send("tools/call", {"name": "endless"}))["taskId"]
        with anyio.fail_after(5):
            await jobs.started.wait()
        await client.send("tasks/cancel", {"taskId": task_id})
    call = await load_call(store, task_id, keys=[KEY])
    assert [(r.round, r.kind) for r in call.rounds] == [(1, "task"), (2, "cancelled")]
    report = await replay_call(Jobs(MemoryStore()).mcp, call)
    assert report.ok and report.skipped == 2
    assert "cancelled" in timeline(call)


async def test_a_failed_task_replays_as_failed() -> None:
    store = MemoryStore()
    async with Client(Jobs(store).mcp, tasks=True) as client:
        task_id = (await client.send("tools/call", {"name": "broken"}))["taskId"]
        await until_status(client, task_id, "failed")
    call = await load_call(store, task_id, keys=[KEY])
    assert [r.kind for r in call.rounds] == ["task", "failed"]
    assert "the backend is gone" in timeline(call)
    report = await replay_call(Jobs(MemoryStore()).mcp, call)
    assert report.ok, report.render()
