"""Tasks in process: made from rounds, polled, answered, cancelled, on one replica or two."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel

from engine import (
    AcceptedElicitation,
    Context,
    Elicit,
    MCPError,
    MCPServer,
    Resolve,
    ToolError,
)
from engine.handlers.task_policy import EXTENSION
from engine.testing import Client, ProtocolError
from stores import MemoryStore, Store
from tests.conftest import KEY

pytestmark = pytest.mark.anyio

YES = {"action": "accept", "content": {"confirm": True}}


class Confirm(BaseModel):
    confirm: bool


class Name(BaseModel):
    name: str


class Count(BaseModel):
    count: int


def confirm_start() -> Elicit[Confirm]:
    return Elicit("Start the job?", Confirm)


class Jobs:
    """A server of task tools, and what their bodies did."""

    def __init__(self, store: Store | None, **options: Any) -> None:
        self.effects: list[str] = []
        self.cancelled = anyio.Event()
        self.started = anyio.Event()
        mcp = MCPServer("jobs", keys=[KEY], store=store, task_poll_interval=0.01, **options)
        self.mcp = mcp

        @mcp.tool(task=True)
        async def report(pages: int, ctx: Context) -> str:
            built = await ctx.once(lambda: self.effects.append(f"built {pages}") or pages)
            answer = await ctx.elicit(f"Send the {built}-page report?", Confirm)
            sent = isinstance(answer, AcceptedElicitation) and answer.data.confirm
            return f"{built} pages, {'sent' if sent else 'kept'}"

        @mcp.tool(task=lambda pages: pages > 10)
        def pages(pages: int) -> str:
            return f"{pages} pages"

        @mcp.tool(task="required")
        def guarded(go: Annotated[Confirm, Resolve(confirm_start)]) -> str:
            return "started" if go.confirm else "not started"

        @mcp.tool(task=True)
        async def endless(ctx: Context) -> str:
            await ctx.once(self.effects.append, "endless began")
            self.started.set()
            try:
                await anyio.sleep_forever()
            finally:
                self.cancelled.set()
            return "never"

        @mcp.tool(task=True)
        def broken() -> str:
            raise MCPError(-32603, "the backend is gone")

        @mcp.tool(task=True)
        def failing() -> str:
            raise ToolError("nothing to build")

        @mcp.tool(task=True)
        async def names(ctx: Context) -> str:
            first, second = await ctx.ask_all(
                Elicit("First name?", Name), Elicit("Second name?", Name)
            )
            return f"{first.data.name} and {second.data.name}"

        @mcp.tool(task=True)
        async def counted(ctx: Context) -> str:
            answer = await ctx.elicit("How many?", Count)
            return f"{answer.data.count} counted"


def yes(params: dict[str, Any]) -> dict[str, Any]:
    return YES


async def test_a_task_is_made_polled_answered_and_completed() -> None:
    jobs = Jobs(MemoryStore())
    async with Client(jobs.mcp, tasks=True, elicitation=yes) as client:
        result = await client.call_tool("report", {"pages": 12})
    assert result.text == "12 pages, sent"
    assert result.task is not None and result.task["status"] == "completed"
    assert result.raw["resultType"] == "complete"
    assert result.rounds[0]["resultType"] == "task"
    assert set(result.rounds[0]) >= {"taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs"}
    assert not {"result", "error", "inputRequests", "requestState"} & set(result.rounds[0])
    asking = next(r for r in result.rounds if r.get("status") == "input_required")
    assert [q["method"] for q in asking["inputRequests"].values()] == ["elicitation/create"]
    assert jobs.effects == ["built 12"]  # the body ran twice, its once step once


async def test_a_client_that_does_not_declare_tasks_gets_rounds() -> None:
    jobs = Jobs(MemoryStore())
    async with Client(jobs.mcp, elicitation=yes) as client:
        result = await client.call_tool("report", {"pages": 3})
    assert result.text == "3 pages, sent"
    assert result.task is None
    assert [r["resultType"] for r in result.rounds] == ["input_required", "complete"]


async def test_the_tool_decides_call_by_call() -> None:
    jobs = Jobs(MemoryStore())
    async with Client(jobs.mcp, tasks=True) as client:
        small = await client.call_tool("pages", {"pages": 2})
        large = await client.call_tool("pages", {"pages": 20})
    assert small.task is None and small.text == "2 pages"
    assert large.task is not None and large.text == "20 pages"


async def test_a_required_task_refuses_a_client_without_the_extension() -> None:
    jobs = Jobs(MemoryStore())
    async with Client(jobs.mcp, elicitation=yes) as client:
        with pytest.raises(ProtocolError) as refused:
            await client.call_tool("guarded")
    assert refused.value.code == -32021
    assert refused.value.status == 400
    assert refused.value.data == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}


async def test_resolvers_are_asked_in_rounds_before_the_task_exists() -> None:
    jobs = Jobs(MemoryStore())
    async with Client(jobs.mcp, tasks=True, elicitation=yes) as client:
        result = await client.call_tool("guarded")
    first, second = result.rounds[:2]
    assert first["resultType"] == "input_required" and "taskId" not in first
    assert second["resultType"] == "task" and "requestState" not in second
    assert result.text == "started"


async def test_without_a_store_a_required_task_says_to_configure_one() -> None:
    jobs = Jobs(None)
    async with Client(jobs.mcp, tasks=True, elicitation=yes) as client:
        plain = await client.call_tool("pages", {"pages": 20})
        with pytest.raises(ProtocolError, match="tasks need a store"):
            await client.call_tool("guarded")
        discovered = await client.send("server/discover")
    assert plain.task is None and plain.text == "20 pages"
    assert "extensions" not in discovered["capabilities"]


async def test_discover_advertises_the_extension_when_a_tool_runs_as_a_task() -> None:
    jobs = Jobs(MemoryStore())
    plain = MCPServer("plain", keys=[KEY], store=MemoryStore())
    plain.tool(name="no_task")(lambda: "no task")
    async with Client(jobs.mcp) as client, Client(plain) as other:
        discovered = await client.send("server/discover")
        without = await other.send("server/discover")
    assert discovered["capabilities"]["extensions"] == {EXTENSION: {}}
    assert "tasks" not in discovered["capabilities"]
    assert "extensions" not in without["capabilities"]


async def test_a_question_the_client_cannot_answer_fails_the_task() -> None:
    jobs = Jobs(MemoryStore())
    async with Client(jobs.mcp, tasks=True) as client:  # no elicitation declared
        with pytest.raises(ProtocolError) as failed:
            await client.call_tool("counted")
    assert failed.value.code == -32021
    assert failed.value.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}


async def test_a_protocol_error_fails_the_task_and_a_tool_error_completes_it() -> None:
    jobs = Jobs(MemoryStore())
    async with Client(jobs.mcp, tasks=True) as client:
        with pytest.raises(ProtocolError) as failed:
            await client.call_tool("broken")
        tool_error = await client.call_tool("failing")
    assert failed.value.code == -32603 and failed.value.message == "the backend is gone"
    assert tool_error.task is not None and tool_error.task["status"] == "completed"
    assert tool_error.is_error
    assert tool_error.text == "Error executing tool failing: nothing to build"


async def test_questions_asked_together_may_be_answered_one_at_a_time() -> None:
    jobs = Jobs(MemoryStore())
    async with Client(jobs.mcp, tasks=True, elicitation=yes) as client:
        made = await client.send("tools/call", {"name": "names"})
        task_id = made["taskId"]
        task = await until_status(client, task_id, "input_required")
        first, second = task["inputRequests"]
        await client.send(
            "tasks/update",
            {
                "taskId": task_id,
                "inputResponses": {first: {"action": "accept", "content": {"name": "Ada"}}},
            },
        )
        waiting = await client.send("tasks/get", {"taskId": task_id})
        assert waiting["status"] == "input_required"
        assert list(waiting["inputRequests"]) == [second]
        await client.send(
            "tasks/update",
            {
                "taskId": task_id,
                "inputResponses": {
                    first: {"action": "accept", "content": {"name": "ignored"}},
                    "never-asked": {"action": "accept", "content": {}},
                    second: {"action": "accept", "content": {"name": "Grace"}},
                },
            },
        )
        done = await until_status(client, task_id, "completed")
    assert done["result"]["content"][0]["text"] == "Ada and Grace"


async def test_a_question_asked_again_gets_a_new_key() -> None:
    jobs = Jobs(MemoryStore())
    async with Client(jobs.mcp, tasks=True, elicitation=yes) as client:
        task_id = (await client.send("tools/call", {"name": "counted"}))["taskId"]
        asked = await until_status(client, task_id, "input_required")
        (key,) = asked["inputRequests"]
        bad = {"action": "accept", "content": {"count": "many"}}
        await client.send("tasks/update", {"taskId": task_id, "inputResponses": {key: bad}})
        again = await until_status(client, task_id, "input_required")
        (new_key,) = again["inputRequests"]
        good = {"action": "accept", "content": {"count": 3}}
        await client.send("tasks/update", {"taskId": task_id, "inputResponses": {key: good}})
        still = await client.send("tasks/get", {"taskId": task_id})
        await client.send("tasks/update", {"taskId": task_id, "inputResponses": {new_key: good}})
        done = await until_status(client, task_id, "completed")
    assert new_key != key
    assert still["status"] == "input_required"  # the spent key was ignored
    assert done["result"]["content"][0]["text"] == "3 counted"


async def test_cancel_stops_the_body_and_the_task_stays_cancelled() -> None:
    jobs = Jobs(MemoryStore())
    async with Client(jobs.mcp, tasks=True) as client:
        task_id = (await client.send("tools/call", {"name": "endless"}))["taskId"]
        with anyio.fail_after(5):
            await jobs.started.wait()
        ack = await client.send("tasks/cancel", {"taskId": task_id})
        with anyio.fail_after(5):
            await jobs.cancelled.wait()
        task = await client.send("tasks/get", {"taskId": task_id})
        again = await client.send("tasks/cancel", {"taskId": task_id})
    assert set(ack) == {"resultType", "_meta"} and ack["resultType"] == "complete"
    assert set(again) == set(ack)
    assert task["status"] == "cancelled"
    assert "result" not in task and "error" not in task


async def test_a_cancel_on_one_replica_stops_the_body_on_another() -> None:
    store = MemoryStore()
    a, b = Jobs(store), Jobs(store)
    async with Client(a.mcp, b.mcp, tasks=True) as client:
        task_id = (await client.send("tools/call", {"name": "endless"}, server=0))["taskId"]
        with anyio.fail_after(5):
            await a.started.wait()
        await client.send("tasks/cancel", {"taskId": task_id}, server=1)
        with anyio.fail_after(5):
            await a.cancelled.wait()
        task = await client.send("tasks/get", {"taskId": task_id}, server=0)
    assert task["status"] == "cancelled"
    assert not b.started.is_set()
    assert a.mcp.core.metrics.value("engine_task_holds_lost_total") == 1


async def test_an_answer_on_another_replica_runs_the_body_there() -> None:
    store = MemoryStore()
    a, b = Jobs(store), Jobs(store)
    async with Client(a.mcp, b.mcp, tasks=True, elicitation=yes) as client:
        task_id = (
            await client.send("tools/call", {"name": "report", "arguments": {"pages": 2}}, server=0)
        )["taskId"]
        asked = await until_status(client, task_id, "input_required")
        (key,) = asked["inputRequests"]
        await client.send(
            "tasks/update", {"taskId": task_id, "inputResponses": {key: YES}}, server=1
        )
        done = await until_status(client, task_id, "completed")
    assert done["result"]["content"][0]["text"] == "2 pages, sent"
    assert a.effects == ["built 2"] and b.effects == []  # b ran the body, from a's checkpoint
    assert a.mcp.core.metrics.value("engine_task_runs_total", status="input_required") == 1
    assert b.mcp.core.metrics.value("engine_task_runs_total", status="completed") == 1


async def test_a_replica_that_stops_gives_its_tasks_back_to_the_others() -> None:
    store = MemoryStore()
    a, b = Jobs(store), Jobs(store, task_lease=1.0)  # a holds for 10 s: due at once if given back
    async with Client(a.mcp, tasks=True) as client:
        task_id = (await client.send("tools/call", {"name": "endless"}))["taskId"]
        with anyio.fail_after(5):
            await a.started.wait()
    assert a.cancelled.is_set()  # a stopped: its body was cancelled...
    row = await store.get_task(task_id)
    assert row is not None and row.status == "working"
    assert await store.due_tasks() == [task_id]  # ...and the task is due at once
    async with Client(b.mcp, tasks=True) as other:
        with anyio.fail_after(10):
            await b.started.wait()  # b took it over
        task = await other.send("tasks/get", {"taskId": task_id})
    assert task["status"] == "working"
    assert a.effects == ["endless began"] and b.effects == []  # its once step was kept
    assert b.mcp.core.metrics.value("engine_task_takeovers_total") == 1


async def test_cancel_keeps_a_finished_task_as_it_ended() -> None:
    jobs = Jobs(MemoryStore())
    async with Client(jobs.mcp, tasks=True) as client:
        done = await client.call_tool("pages", {"pages": 50})
        assert done.task_id is not None
        await client.send("tasks/cancel", {"taskId": done.task_id})
        task = await client.send("tasks/get", {"taskId": done.task_id})
    assert task["status"] == "completed"
    assert task["result"]["content"][0]["text"] == "50 pages"


async def test_unknown_tasks_and_undeclared_clients_are_refused() -> None:
    jobs = Jobs(MemoryStore())
    async with Client(jobs.mcp, tasks=True) as client, Client(jobs.mcp) as plain:
        for method, params in (
            ("tasks/get", {"taskId": "no-such-task"}),
            ("tasks/update", {"taskId": "no-such-task", "inputResponses": {}}),
            ("tasks/cancel", {"taskId": "no-such-task"}),
        ):
            with pytest.raises(ProtocolError) as unknown:
                await client.send(method, params)
            assert unknown.value.code == -32602
            with pytest.raises(ProtocolError) as undeclared:
                await plain.send(method, params)
            assert undeclared.value.code == -32021
        with pytest.raises(ProtocolError, match="inputResponses"):
            await client.send("tasks/update", {"taskId": "t", "inputResponses": [1]})
        for removed in ("tasks/result", "tasks/list"):
            with pytest.raises(ProtocolError) as gone:
                await client.send(removed, {"taskId": "t"})
            assert gone.value.code == -32601


async def test_only_the_principal_that_made_a_task_reaches_it() -> None:
    def principal(scope: Any) -> str | None:
        return None if scope.headers is None else scope.headers.get("x-user")

    jobs = Jobs(MemoryStore(), principal=principal)
    alice = Client(jobs.mcp, tasks=True, headers={"x-user": "alice"})
    bob = Client(jobs.mcp, tasks=True, headers={"x-user": "bob"})
    async with alice, bob:
        done = await alice.call_tool("pages", {"pages": 11})
        assert done.task_id is not None
        for method in ("tasks/get", "tasks/cancel"):
            with pytest.raises(ProtocolError) as hidden:
                await bob.send(method, {"taskId": done.task_id})
            assert hidden.value.code == -32602
        assert (await alice.send("tasks/get", {"taskId": done.task_id}))["status"] == "completed"


async def test_a_task_is_gone_once_its_ttl_has_passed() -> None:
    jobs = Jobs(MemoryStore(), task_ttl=0.3)
    async with Client(jobs.mcp, tasks=True) as client:
        done = await client.call_tool("pages", {"pages": 11})
        assert done.task is not None and done.task["ttlMs"] == 300
        await anyio.sleep(0.4)
        with pytest.raises(ProtocolError) as expired:
            await client.send("tasks/get", {"taskId": done.task_id})
    assert expired.value.code == -32602


async def test_two_replicas_share_every_task() -> None:
    store = MemoryStore()
    a, b = Jobs(store), Jobs(store)
    async with Client(a.mcp, b.mcp, tasks=True, elicitation=yes) as client:
        result = await client.call_tool("report", {"pages": 5})
    assert result.text == "5 pages, sent"
    assert set(result.servers) == {"0", "1"}
    assert a.effects + b.effects == ["built 5"]


async def test_registration_refuses_a_task_option_it_cannot_use() -> None:
    mcp = MCPServer("jobs", keys=[KEY])
    with pytest.raises(ValueError, match="task= takes True, 'required', or a function"):
        mcp.tool(name="x", task="sometimes")(lambda: "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="takes size, which the tool does not"):

        @mcp.tool(task=lambda size: size > 1)
        def build(pages: int) -> str:
            return "x"


async def until_status(client: Client, task_id: str, status: str) -> dict[str, Any]:
    with anyio.fail_after(5):
        while True:
            task = await client.send("tasks/get", {"taskId": task_id})
            if task["status"] == status:
                return task
            await anyio.sleep(0.01)
