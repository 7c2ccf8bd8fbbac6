"""``python -m engine call`` follows a task to its end; ``python -m engine tasks`` lists them."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.cli.test_cli import Server, engine, serving
from tests.conftest import KEY

SERVER = '''
import anyio
from pydantic import BaseModel

from engine import AcceptedElicitation, Context, MCPServer

mcp = MCPServer("reports", task_poll_interval=0.05)


class Send(BaseModel):
    email: str


@mcp.tool(task=True)
async def report(quarter: str, ctx: Context) -> str:
    """Builds the quarter's report, then asks where to send it."""
    await anyio.sleep(0.2)
    answer = await ctx.elicit(f"Send the {quarter} report to?", Send)
    if not isinstance(answer, AcceptedElicitation):
        return "kept"
    return f"{quarter} sent to {answer.data.email}"
'''
ANSWER = '{"action": "accept", "content": {"email": "cfo@example.com"}}'


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    directory = tmp_path_factory.mktemp("cli-tasks")
    app = directory / "reports.py"
    app.write_text(SERVER)
    with serving(str(app), directory) as running:
        yield running


def test_call_follows_a_task_answering_its_question(reports: Server) -> None:
    done = engine(
        "call", reports.url, "report", "--arg", "quarter=Q3", "--answer", f"elicit#1={ANSWER}"
    )
    assert done.returncode == 0, done.stderr + done.stdout
    lines = done.stdout.splitlines()
    assert lines[0] == 'round 1 → tools/call report {"quarter": "Q3"}'
    assert lines[1] == "round 1 ← task (replica cli-test)"
    task_id = lines[2].split()[1].rstrip(":")
    assert lines[2] == f"task {task_id}: working"
    assert f"task {task_id}: input_required (replica cli-test)" in lines
    assert "[elicit#1] elicitation/create" in lines
    assert f"  answered from --answer: {ANSWER}" in lines
    assert f"task {task_id}: answered elicit#1" in lines
    assert f"task {task_id}: completed (replica cli-test)" in lines
    assert lines[-2:] == [
        "  result  Q3 sent to cfo@example.com",
        '  structured {"result": "Q3 sent to cfo@example.com"}',
    ]

    listed = engine("tasks", "--store", reports.store, "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert {"task_id": task_id, "tool": "report", "status": "completed"}.items() <= next(
        row for row in rows if row["task_id"] == task_id
    ).items()

    table = engine("tasks", "--store", reports.store, "--status", "completed")
    assert table.stdout.splitlines()[0].split() == [
        "TASK",
        "ID",
        "TOOL",
        "STATUS",
        "CREATED",
        "(UTC)",
        "UPDATED",
    ]
    assert any(
        line.startswith(task_id) and "completed" in line for line in table.stdout.splitlines()
    )
    assert (
        "No tasks failed." in engine("tasks", "--store", reports.store, "--status", "failed").stdout
    )

    shown = engine("show", task_id, "--store", reports.store, "--keys", KEY)
    assert shown.returncode == 0, shown.stderr
    assert "→ task" in shown.stdout and "→ input_required" in shown.stdout
    assert "result  Q3 sent to cfo@example.com" in shown.stdout
