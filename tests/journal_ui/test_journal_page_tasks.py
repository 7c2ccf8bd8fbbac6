"""A task on the journal page: taken over by another replica after a SIGKILL, the page shows
both replicas' lanes and marks the run that took it over."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import anyio
import httpx

from tests.http_helpers import assert_result, post, request
from tests.journal_ui.helpers import Served, browser_page, chromium, journal_page, replica
from tests.tasks.test_task_takeover import SERVER, TASKS, checkpointed, journaled


async def taken_over_task(db: Path, log_dir: Path, effects: Path) -> str:
    env = {"TASK_EFFECTS": str(effects), "TASK_NAP": "3"}
    first = replica(SERVER, "doomed", db, log_dir, **env)
    second: Served | None = None
    try:
        second = replica(SERVER, "survivor", db, log_dir, **env)
        async with httpx.AsyncClient(base_url=first.url, timeout=10) as a:
            body = request(
                "tools/call", {"name": "slow_once", "arguments": {"n": 4}}, capabilities=TASKS
            )
            task_id = str(assert_result(await post(a, body))["taskId"])
        deadline = time.monotonic() + 20
        while not await checkpointed(db, task_id):  # the body naps now
            assert time.monotonic() < deadline, first.log.read_text()
            await anyio.sleep(0.05)
        await journaled(db, task_id, (1, "task"))
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(5)
        await journaled_for_long(db, task_id)
        return task_id
    finally:
        first.stop()
        if second is not None:
            second.stop()


async def journaled_for_long(db: Path, task_id: str) -> None:
    """The survivor took the task over once the killed run's hold lapsed, and finished it."""
    deadline = time.monotonic() + 30
    while True:
        try:
            await journaled(db, task_id, (2, "complete"))
            return
        except TimeoutError:
            if time.monotonic() > deadline:
                raise


def test_a_task_taken_over_after_a_sigkill_shows_the_takeover(tmp_path: Path) -> None:
    chromium()
    db = tmp_path / "tasks.sqlite3"
    task_id = anyio.run(taken_over_task, db, tmp_path, tmp_path / "effects.txt")
    page_server = journal_page(db, tmp_path)
    try:
        with browser_page() as page:
            page.goto(page_server.url + "/")
            page.click(f'tr[data-call-id="{task_id}"] a')
            lanes = page.locator("svg.timeline g.lane.replica")
            assert lanes.evaluate_all("lanes => lanes.map(l => l.dataset.lane)") == [
                "doomed",
                "survivor",
            ]
            taken = page.locator("svg.timeline g.lane[data-lane=survivor] g.bar.takeover")
            assert taken.count() == 1
            assert "R2 taken over" in (taken.text_content() or "")
            takeover = page.locator("#task li.takeover")
            assert takeover.count() == 1
            assert "Round 2: taken over by survivor under hold 2" in takeover.inner_text()
            assert "came to complete" in takeover.inner_text()
            assert "Round 1: made on doomed" in page.inner_text("#task")
            assert "completed" in page.inner_text("#task-now")
            assert "taken over" in page.locator("#round-2 h3").inner_text()
    finally:
        page_server.stop()
