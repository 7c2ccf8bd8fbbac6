"""An in-process MCP client for tests and demos: real JSON-RPC messages, no network.

Every request is serialised and parsed as it would be on the wire, and dispatched to the server
exactly as a transport would. Give it several servers and it sends successive requests to each in
turn, like a round-robin load balancer in front of replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from engine.app import MCPServer
from engine.debug.journal import RecordedCall, ReplayError, load_call, load_fixture
from engine.debug.replay import ReplayReport, replay_call
from engine.debug.tokens import describe_request_state
from engine.handlers.task_policy import EXTENSION
from engine.protocol.dispatch import dispatch
from engine.protocol.jsonrpc import dumps, loads
from engine.protocol.modern import META_CAPABILITIES, META_VERSION, MODERN, Exchange
from engine.questions.kinds import declared_capabilities, kind_of_request
from engine.state.seal import KeyRing

Callback = Callable[[dict[str, Any]], Any] | Callable[[dict[str, Any]], Awaitable[Any]]


class RoundLimitExceeded(RuntimeError):
    pass


class ProtocolError(RuntimeError):
    """The server answered with a JSON-RPC error."""

    def __init__(self, error: dict[str, Any], status: int) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code: int = error.get("code", 0)
        self.message: str = error.get("message", "")
        self.data: Any = error.get("data")
        self.status = status


@dataclass
class CallResult:
    """The final result of a multi-round call, with every round's raw result.

    A call that became a task has its last ``tasks/get`` result in ``task``, and each poll and
    update among its ``rounds``.
    """

    raw: dict[str, Any]
    rounds: list[dict[str, Any]] = field(default_factory=list)
    servers: list[str] = field(default_factory=list)
    task: dict[str, Any] | None = None

    @property
    def task_id(self) -> str | None:
        return None if self.task is None else self.task.get("taskId")

    @property
    def is_error(self) -> bool:
        return bool(self.raw.get("isError"))

    @property
    def content(self) -> list[dict[str, Any]]:
        content: list[dict[str, Any]] = self.raw.get("content", [])
        return content

    @property
    def structured_content(self) -> Any:
        return self.raw.get("structuredContent")

    @property
    def text(self) -> str:
        return "".join(b.get("text", "") for b in self.content if b.get("type") == "text")


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class Client:
    """Drives multi-round calls in process.

    ``elicitation``, ``sampling`` and ``roots`` are callbacks that receive the question's params
    and return the answer (a dict or a wire model); ``callbacks`` adds others by name, for a
    question kind that names its own (``QuestionKind.callback``). The capabilities of the kinds
    whose callbacks are given are declared, unless ``capabilities`` says otherwise.
    ``tasks=True`` declares the Tasks extension: a call that becomes a task is then followed to
    its end (polled as the server asks, its questions answered with ``tasks/update``), for
    ``task_timeout`` seconds at most.
    """

    def __init__(
        self,
        *servers: MCPServer,
        elicitation: Callback | None = None,
        sampling: Callback | None = None,
        roots: Callback | None = None,
        callbacks: Mapping[str, Callback] | None = None,
        capabilities: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        max_rounds: int = 10,
        tasks: bool = False,
        task_timeout: float = 60.0,
    ) -> None:
        if not servers:
            raise ValueError("Client needs at least one server")
        self.servers = servers
        self._next = itertools.cycle(range(len(servers)))
        self.elicitation = elicitation
        self.sampling = sampling
        self.roots = roots
        self.callbacks: dict[str, Callback] = dict(callbacks or {})
        if capabilities is None:
            named = {"elicitation": elicitation, "sampling": sampling, "roots": roots}
            given = [name for name, callback in named.items() if callback is not None]
            capabilities = declared_capabilities([*given, *self.callbacks])
            if tasks:
                capabilities["extensions"] = {EXTENSION: {}}
        self.capabilities = capabilities
        self.task_timeout = task_timeout
        self.headers = headers
        self.max_rounds = max_rounds
        self.notifications: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self.last_server = 0
        """Which of the servers answered the last request (its index)."""
        self.last_body = b""
        """The raw bytes of the last response, as a transport would have sent them."""

    async def __aenter__(self) -> Client:
        self._stack = contextlib.AsyncExitStack()
        for server in {id(s): s for s in self.servers}.values():
            await self._stack.enter_async_context(server.core.running())
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._stack.aclose()

    def meta(self) -> dict[str, Any]:
        return {
            META_VERSION: MODERN,
            META_CAPABILITIES: self.capabilities,
            "io.modelcontextprotocol/clientInfo": {"name": "engine-testing", "version": "0"},
        }

    async def send(
        self, method: str, params: dict[str, Any] | None = None, *, server: int | None = None
    ) -> dict[str, Any]:
        """One request; the raw ``result``, or :class:`ProtocolError`."""
        index = next(self._next) if server is None else server
        params = dict(params or {})
        params.setdefault("_meta", self.meta())
        message = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}

        async def collect(method: str, params: dict[str, Any]) -> None:
            self.notifications.append({"method": method, "params": params})

        exchange = Exchange(headers=self.headers, notify=collect)
        response = await dispatch(self.servers[index].core, loads(dumps(message)), exchange)
        assert response.body is not None
        reply = loads(response.body)
        if "error" in reply:
            raise ProtocolError(reply["error"], response.status)
        result: dict[str, Any] = reply["result"]
        self.last_server = index
        self.last_body = response.body
        return result

    @property
    def last_result_bytes(self) -> bytes:
        """The serialised ``result`` of the last response, exactly as the server produced it."""
        return self.last_body.partition(b',"result":')[2][:-1]

    async def list_tools(self) -> list[dict[str, Any]]:
        result = await self.send("tools/list")
        tools: list[dict[str, Any]] = result["tools"]
        return tools

    async def answer(self, request: dict[str, Any]) -> Any:
        method = request["method"]
        params = request.get("params", {})
        kind = kind_of_request(request)
        if kind is None:
            raise RuntimeError(f"the server asked {method}, which no registered question kind asks")
        named = {"elicitation": self.elicitation, "sampling": self.sampling, "roots": self.roots}
        callback = self.callbacks.get(kind.callback) or named.get(kind.callback)
        if callback is None:
            raise RuntimeError(f"the server asked {method} but the client has no callback for it")
        answer = await _maybe_await(callback(params))
        if hasattr(answer, "to_wire"):
            answer = answer.to_wire()
        elif hasattr(answer, "model_dump"):
            answer = answer.model_dump(mode="json", by_alias=True, exclude_none=True)
        return answer

    async def run(self, method: str, params: dict[str, Any]) -> CallResult:
        """Run a multi-round request to completion, answering every question."""
        rounds: list[dict[str, Any]] = []
        servers: list[str] = []
        responses: dict[str, Any] | None = None
        state: str | None = None
        for _ in range(self.max_rounds):
            round_params = dict(params)
            if responses is not None:
                round_params["inputResponses"] = responses
            if state is not None:
                round_params["requestState"] = state
            result = await self.send(method, round_params)
            rounds.append(result)
            servers.append(str(self.last_server))
            if result.get("resultType") == "task":
                return await self.follow(result["taskId"], rounds, servers)
            if result.get("resultType") != "input_required":
                return CallResult(result, rounds, servers)
            requests = result.get("inputRequests") or {}
            responses = {key: await self.answer(req) for key, req in requests.items()}
            state = result.get("requestState")
        raise RoundLimitExceeded(f"no final result after {self.max_rounds} rounds")

    async def follow(
        self,
        task_id: str,
        rounds: list[dict[str, Any]] | None = None,
        servers: list[str] | None = None,
    ) -> CallResult:
        """Poll a task to its end, answering its questions; a failed task raises
        :class:`ProtocolError` with its error, as the call would have without a task."""
        rounds = [] if rounds is None else rounds
        servers = [] if servers is None else servers
        answered: set[str] = set()
        with anyio.fail_after(self.task_timeout):
            while True:
                task = await self.send("tasks/get", {"taskId": task_id})
                rounds.append(task)
                servers.append(str(self.last_server))
                status = task.get("status")
                if status == "completed":
                    return CallResult(task.get("result") or {}, rounds, servers, task)
                if status == "failed":
                    raise ProtocolError(task.get("error") or {}, 200)
                if status == "cancelled":
                    return CallResult({}, rounds, servers, task)
                requests = {
                    key: request
                    for key, request in (task.get("inputRequests") or {}).items()
                    if key not in answered
                }
                if requests:
                    responses = {key: await self.answer(req) for key, req in requests.items()}
                    answered.update(responses)
                    await self.send(
                        "tasks/update", {"taskId": task_id, "inputResponses": responses}
                    )
                    continue
                await anyio.sleep(task.get("pollIntervalMs", 100) / 1000)

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> CallResult:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return await self.run("tools/call", params)

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None) -> CallResult:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return await self.run("prompts/get", params)

    async def read_resource(self, uri: str) -> CallResult:
        return await self.run("resources/read", {"uri": uri})


@contextlib.asynccontextmanager
async def connect(*servers: MCPServer, **options: Any) -> AsyncIterator[Client]:
    async with Client(*servers, **options) as client:
        yield client


# --- replaying recorded calls -----------------------------------------------------------------


def replay(
    app: MCPServer, fixture: str | Path, *, arguments: dict[str, Any] | None = None
) -> ReplayReport:
    """Replay an exported call against ``app``; raise ``AssertionError`` at a divergence.

    A fixture made with ``python -m engine export CALL_ID`` becomes a regression test of
    in-flight compatibility: a change that would make waiting calls ask again, or end
    differently, fails here before it is deployed. Synchronous, for plain pytest tests; in an
    async test, ``await replay_call(app, load_fixture(path))`` (both from this module).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "engine.testing.replay() runs its own event loop; in an async test use "
            "`await engine.testing.replay_call(app, engine.testing.load_fixture(path))`"
        )
    call = load_fixture(fixture)
    report = anyio.run(lambda: replay_call(app, call, arguments=arguments))
    if not report.ok:
        raise AssertionError(f"{fixture}:\n{report.render()}")
    return report


def ephemeral_keys() -> KeyRing:
    """A requestState key for this process only, chosen on purpose: ``MCPServer(keys=
    ephemeral_keys())`` in tests and examples stays quiet, where a server given no keys at all
    warns that no other replica could resume its calls."""
    return KeyRing.ephemeral_ring()


def inspect_request_state(server: MCPServer, token: str) -> dict[str, Any]:
    """What a requestState minted by ``server`` holds, opened with its keys: ``key_id``,
    ``claims`` and ``state`` (or ``state_ref`` when the state is kept in the store), as
    ``python -m engine inspect`` prints it."""
    return describe_request_state(server.keys, token)


__all__ = [
    "CallResult",
    "Client",
    "ProtocolError",
    "RecordedCall",
    "ReplayError",
    "ReplayReport",
    "RoundLimitExceeded",
    "connect",
    "ephemeral_keys",
    "inspect_request_state",
    "load_call",
    "load_fixture",
    "replay",
    "replay_call",
]
