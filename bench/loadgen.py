"""One load generator for every server: keep-alive HTTP/1.1 over raw asyncio streams.

Each of N connections runs whole tool calls back to back, driving the multi-round loop itself:
it posts round 1, answers every ``inputRequests`` entry with a canned answer, and retries with
``inputResponses`` plus the echoed ``requestState`` until the result is ``complete``. Responses
may be JSON or SSE (``text/event-stream``, plain or chunked). Every final result is checked
against the workload's expected text and round count; anything else is a failure, and a run
with failures is invalid.

Requests carry the 2026-07-28 headers (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``)
and ``_meta`` (protocol version and client capabilities: elicitation, sampling, roots).

Only the standard library is required; ``pydantic_core`` JSON is used when importable (it is
in the project venv) because the client must not be the bottleneck.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

_dumps: Callable[[Any], bytes]
_loads: Callable[[bytes], Any]
try:
    from pydantic_core import from_json, to_json

    _dumps, _loads = to_json, from_json
except ImportError:  # pragma: no cover - plain-stdlib fallback
    import json

    def _json_dumps(value: Any) -> bytes:
        return json.dumps(value, separators=(",", ":")).encode()

    _dumps, _loads = _json_dumps, json.loads


PROTOCOL = "2026-07-28"
META: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL,
    "io.modelcontextprotocol/clientCapabilities": {
        "elicitation": {"form": {}},
        "sampling": {},
        "roots": {"listChanged": False},
    },
}
META_TASKS: dict[str, Any] = {
    **META,
    "io.modelcontextprotocol/clientCapabilities": {
        **META["io.modelcontextprotocol/clientCapabilities"],
        "extensions": {"io.modelcontextprotocol/tasks": {}},
    },
}
"""The same, declaring the Tasks extension: what the task workload's requests carry."""
MAX_ROUNDS = 10
MAX_POLLS = 200
"""``tasks/get`` a task call may take before it counts as failed."""


# --- workloads -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """One tool call, the answers the client gives, and what must come back."""

    key: str
    label: str
    tool: str
    arguments: dict[str, Any]
    expected_text: str
    expected_rounds: int
    sample_text: str = "Hyperion"
    task: bool = False
    """The call becomes a task: created, polled (``tasks/get``) until it asks, answered
    (``tasks/update``), polled until it ends. Its rounds are those requests."""

    def answer(self, request: Any) -> Any:
        """The canned answer to one embedded request (``{"method": ..., "params": ...}``)."""
        method = request.get("method") if isinstance(request, dict) else None
        params = request.get("params") or {}
        if method == "elicitation/create":
            content: dict[str, Any] = {}
            props = (params.get("requestedSchema") or {}).get("properties") or {}
            for name, prop in props.items():
                kind = prop.get("type")
                if kind == "boolean":
                    content[name] = True
                elif kind in ("number", "integer"):
                    content[name] = 1
                else:
                    content[name] = "yes"
            return {"action": "accept", "content": content}
        if method == "sampling/createMessage":
            return {
                "role": "assistant",
                "content": {"type": "text", "text": self.sample_text},
                "model": "bench-llm",
                "stopReason": "endTurn",
            }
        if method == "roots/list":
            return {"roots": [{"uri": "file:///tmp/bench", "name": "bench"}]}
        raise ValueError(f"unexpected input request {method!r}")


MEGABYTE_TEXT = ("All work and no play makes a long sampled answer. " * 20_000)[:1_000_000]

WORKLOADS: dict[str, Workload] = {
    w.key: w
    for w in [
        Workload(
            "one_round",
            "1-round reserve_book(Dune)",
            "reserve_book",
            {"title": "Dune"},
            "Reserved 'Dune' (6 copies left).",
            1,
        ),
        Workload(
            "two_round",
            "2-round order_book(Neuromancer): 1 elicitation",
            "order_book",
            {"title": "Neuromancer"},
            "Backordered 'Neuromancer'; it ships in 2-3 weeks.",
            2,
        ),
        Workload(
            "chain",
            "chain Sample → Elicit → Elicit",
            "recommend_and_order",
            {"genre": "science fiction"},
            "Ordered 'Hyperion' (science fiction).",
            4,
        ),
        Workload(
            "sample_1mb",
            "1 MB sampled answer, then 1 elicitation",
            "publish_draft",
            {"topic": "bookshops"},
            f"Published {len(MEGABYTE_TEXT)} characters on 'bookshops'.",
            3,
            sample_text=MEGABYTE_TEXT,
        ),
        Workload(
            "slow_pair",
            "2 independent 50 ms resolvers",
            "slow_pair",
            {"item": "x"},
            "left:x right:x",
            1,
        ),
        Workload(
            "task",
            "task order_book(Neuromancer): create, polls, 1 answer, result",
            "order_as_task",
            {"title": "Neuromancer"},
            "Backordered 'Neuromancer'; it ships in 2-3 weeks.",
            4,
            task=True,
        ),
    ]
}


# --- HTTP/1.1 keep-alive client ------------------------------------------------------------------


class HTTPError(Exception):
    pass


class Connection:
    """One keep-alive connection; reconnects after the server closes it."""

    def __init__(
        self, host: str, port: int, path: str = "/mcp", headers: Mapping[str, str] | None = None
    ) -> None:
        self.host = host
        self.port = port
        self.path = path
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        self.head = (
            f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            "Content-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\n"
            f"MCP-Protocol-Version: {PROTOCOL}\r\n{extra}"
        ).encode()

    async def connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(
            self.host, self.port, limit=1 << 20
        )

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def post(self, method: str, name: str | None, body: bytes) -> tuple[int, str, bytes]:
        """``(status, content type, body)`` of one POST."""
        if self.writer is None:
            await self.connect()
        assert self.reader is not None and self.writer is not None
        head = self.head + b"Mcp-Method: " + method.encode() + b"\r\n"
        if name is not None:
            head += b"Mcp-Name: " + name.encode() + b"\r\n"
        head += b"Content-Length: %d\r\n\r\n" % len(body)
        self.writer.write(head + body if len(body) < 65536 else head)
        if len(body) >= 65536:
            self.writer.write(body)
        reader = self.reader
        raw = await reader.readuntil(b"\r\n\r\n")
        lines = raw[:-4].split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise HTTPError(f"bad status line {lines[0]!r}")
        status = int(parts[1])
        length = -1
        chunked = False
        close = False
        content_type = ""
        for line in lines[1:]:
            key, _, value = line.partition(b":")
            key = key.strip().lower()
            if key == b"content-length":
                length = int(value)
            elif key == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif key == b"content-type":
                content_type = value.strip().decode("latin-1")
            elif key == b"connection":
                close = b"close" in value.lower()
        if chunked:
            chunks = []
            while True:
                size_line = await reader.readuntil(b"\r\n")
                size = int(size_line.split(b";", 1)[0], 16)
                if size == 0:
                    while (await reader.readuntil(b"\r\n")) != b"\r\n":
                        pass
                    break
                chunks.append(await reader.readexactly(size))
                await reader.readexactly(2)
            data = b"".join(chunks)
        elif length >= 0:
            data = await reader.readexactly(length)
        else:
            data = await reader.read()
            close = True
        if close:
            self.close()
        return status, content_type, data


def _message_from(content_type: str, data: bytes, request_id: int) -> Any:
    """The JSON-RPC response in a JSON or SSE body."""
    if content_type.startswith("text/event-stream"):
        for event in data.split(b"\n\n"):
            payload = b"\n".join(
                line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")
            )
            if not payload:
                continue
            message = _loads(payload)
            if isinstance(message, dict) and message.get("id") == request_id:
                return message
        raise HTTPError("no response in the event stream")
    return _loads(data)


# --- one call ------------------------------------------------------------------------------------


@dataclass
class CallOutcome:
    ok: bool
    rounds: int
    tokens: list[int]
    error: str | None = None


class Caller:
    """Runs whole calls of one workload over one connection."""

    def __init__(self, conn: Connection, workload: Workload, on_round: Callable[[], None]) -> None:
        self.conn = conn
        self.workload = workload
        self.on_round = on_round
        self.next_id = 0
        # Round 1 is the same for every call but its id: pre-serialise everything else.
        self.params_head = _dumps({"name": workload.tool, "arguments": workload.arguments})[:-1]
        self.meta = _dumps(META_TASKS if workload.task else META)

    def _body(self, request_id: int, responses: Any, state: str | None) -> bytes:
        params = self.params_head + b',"_meta":' + self.meta
        if responses is not None:
            params += b',"inputResponses":' + _dumps(responses)
        if state is not None:
            params += b',"requestState":' + _dumps(state)
        return (
            b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":' % request_id
            + params
            + b"}}"
        )

    async def _rpc(self, method: str, name: str, params: dict[str, Any]) -> Any:
        """One request (a round); its result, or a failed outcome's error text."""
        self.next_id += 1
        request_id = self.next_id
        body = (
            b'{"jsonrpc":"2.0","id":%d,"method":"' % request_id
            + method.encode()
            + b'","params":'
            + _dumps(params)[:-1]
            + b',"_meta":'
            + self.meta
            + b"}}"
        )
        status, content_type, data = await self.conn.post(method, name, body)
        self.on_round()
        if status != 200:
            raise HTTPError(f"{method}: HTTP {status}: {data[:200]!r}")
        message = _message_from(content_type, data, request_id)
        if "error" in message:
            raise HTTPError(f"{method}: JSON-RPC error {message['error']}")
        return message.get("result") or {}

    async def call_task(self) -> CallOutcome:
        """Create the task, poll until it asks, answer, poll until it ends."""
        workload = self.workload
        arguments = {"name": workload.tool, "arguments": workload.arguments}
        created = await self._rpc("tools/call", workload.tool, arguments)
        if created.get("resultType") != "task":
            return CallOutcome(False, 1, [], f"no task: {str(created)[:200]}")
        task_id = created["taskId"]
        rounds, answered = 1, False
        for _ in range(MAX_POLLS):
            task = await self._rpc("tasks/get", task_id, {"taskId": task_id})
            rounds += 1
            status = task.get("status")
            if status == "input_required" and not answered:
                requests = task.get("inputRequests") or {}
                responses = {key: workload.answer(req) for key, req in requests.items()}
                update = {"taskId": task_id, "inputResponses": responses}
                await self._rpc("tasks/update", task_id, update)
                rounds += 1
                answered = True
            elif status == "completed":
                content = (task.get("result") or {}).get("content") or []
                text = content[0].get("text") if content else None
                if text != workload.expected_text:
                    return CallOutcome(False, rounds, [], f"unexpected result {text!r}")
                return CallOutcome(True, rounds, [])
            elif status in ("failed", "cancelled"):
                return CallOutcome(False, rounds, [], f"task {status}: {str(task)[:200]}")
        return CallOutcome(False, rounds, [], f"task not done after {MAX_POLLS} polls")

    async def call(self) -> CallOutcome:
        workload = self.workload
        if workload.task:
            return await self.call_task()
        responses: Any = None
        state: str | None = None
        tokens: list[int] = []
        rounds = 0
        while True:
            self.next_id += 1
            request_id = self.next_id
            body = self._body(request_id, responses, state)
            status, content_type, data = await self.conn.post("tools/call", workload.tool, body)
            rounds += 1
            self.on_round()
            if status != 200:
                return CallOutcome(False, rounds, tokens, f"HTTP {status}: {data[:200]!r}")
            message = _message_from(content_type, data, request_id)
            if "error" in message:
                return CallOutcome(False, rounds, tokens, f"JSON-RPC error {message['error']}")
            result = message.get("result") or {}
            if result.get("resultType") == "input_required":
                if rounds >= MAX_ROUNDS:
                    return CallOutcome(False, rounds, tokens, "too many rounds")
                state = result.get("requestState")
                if state is not None:
                    tokens.append(len(state))
                requests = result.get("inputRequests") or {}
                responses = {key: workload.answer(req) for key, req in requests.items()}
                continue
            if result.get("isError"):
                return CallOutcome(False, rounds, tokens, f"error result {str(result)[:300]}")
            content = result.get("content") or []
            text = content[0].get("text") if content and isinstance(content[0], dict) else None
            if text != workload.expected_text:
                return CallOutcome(False, rounds, tokens, f"unexpected result {text!r}")
            if rounds != workload.expected_rounds:
                return CallOutcome(
                    False, rounds, tokens, f"{rounds} rounds, expected {workload.expected_rounds}"
                )
            return CallOutcome(True, rounds, tokens)


# --- a timed run ---------------------------------------------------------------------------------


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads) and of the processes under it (the workers
    of ``serve --workers``), from ``/proc/<pid>/stat``."""
    ticks = _cpu_ticks(pid)  # OSError when there is no such process
    for child in process_tree(pid)[1:]:
        with contextlib.suppress(OSError):  # it exited meanwhile
            ticks += _cpu_ticks(child)
    return ticks / os.sysconf("SC_CLK_TCK")


def _cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        raw = f.read()
    fields = raw[raw.rindex(b")") + 2 :].split()
    # fields[0] is the state (field 3); utime and stime are fields 14 and 15.
    return int(fields[11]) + int(fields[12])


def process_tree(pid: int) -> list[int]:
    """``pid`` and every live process under it, from ``/proc``."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with (
                contextlib.suppress(OSError, IndexError, ValueError),
                open(f"/proc/{entry}/stat", "rb") as f,
            ):
                raw = f.read()
                parents[int(entry)] = int(raw[raw.rindex(b")") + 2 :].split()[1])
    found = [pid]
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found.extend(frontier)
    return found


def run_queue_seconds(pid: int) -> float:
    """Time the main threads of the process and those under it (the server's event loops)
    have spent ready to run but waiting for a CPU, from ``/proc/<pid>/schedstat``; 0 where the
    kernel does not keep it."""
    total = 0.0
    for each in process_tree(pid):
        with (
            contextlib.suppress(OSError, IndexError, ValueError),
            open(f"/proc/{each}/schedstat") as f,
        ):
            total += int(f.read().split()[1]) / 1e9
    return total


def system_busy_seconds() -> float:
    """CPU seconds all processes have spent busy since boot, from ``/proc/stat``."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


@dataclass
class RunResult:
    workload: str
    server: str
    connections: int
    duration: float
    calls: int = 0
    rounds: int = 0
    failures: int = 0
    first_errors: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    token_after_first_answer: list[int] = field(default_factory=list)
    server_cpu: float = 0.0
    client_cpu: float = 0.0
    store_cpu: float = 0.0
    """CPU of the store's server (Redis) over the window, when its process is known."""
    system_busy: float = 0.0
    server_waiting: float = 0.0
    """Seconds the server's event loop was ready to run but had no CPU (see `run_queue_seconds`)."""

    @property
    def valid(self) -> bool:
        return self.failures == 0 and self.calls > 0

    @classmethod
    def combined(cls, parts: list[RunResult]) -> RunResult:
        """One result from several windows of the same server and workload: counts, CPU and
        time add up, samples are pooled (so rates and percentiles cover every window)."""
        first = parts[0]
        whole = cls(first.workload, first.server, first.connections, 0.0)
        for part in parts:
            whole.duration += part.duration
            whole.calls += part.calls
            whole.rounds += part.rounds
            whole.failures += part.failures
            whole.first_errors += part.first_errors[: max(0, 5 - len(whole.first_errors))]
            whole.latencies += part.latencies
            whole.tokens += part.tokens
            whole.token_after_first_answer += part.token_after_first_answer
            whole.server_cpu += part.server_cpu
            whole.client_cpu += part.client_cpu
            whole.store_cpu += part.store_cpu
            whole.system_busy += part.system_busy
            whole.server_waiting += part.server_waiting
        return whole

    def summary(self) -> dict[str, Any]:
        lat = sorted(self.latencies)

        def pct(p: float) -> float | None:
            if not lat:
                return None
            return lat[min(len(lat) - 1, round(p / 100 * (len(lat) - 1)))] * 1000

        def mean(values: list[int]) -> float | None:
            return sum(values) / len(values) if values else None

        return {
            "workload": self.workload,
            "server": self.server,
            "valid": self.valid,
            "connections": self.connections,
            "duration_s": self.duration,
            "calls": self.calls,
            "rounds": self.rounds,
            "failures": self.failures,
            "errors": self.first_errors,
            "calls_per_s": self.calls / self.duration,
            "rounds_per_s": self.rounds / self.duration,
            "p50_ms": pct(50),
            "p99_ms": pct(99),
            "token_bytes_per_round": mean(self.tokens),
            "token_bytes_max": max(self.tokens) if self.tokens else 0,
            "token_after_first_answer": mean(self.token_after_first_answer),
            "server_cpu_s": self.server_cpu,
            "server_cpu_us_per_round": (self.server_cpu / self.rounds * 1e6)
            if self.rounds
            else None,
            "server_cpu_share": self.server_cpu / self.duration,
            "server_waiting_share": self.server_waiting / self.duration,
            "client_cpu_share": self.client_cpu / self.duration,
            "store_cpu_share": self.store_cpu / self.duration,
            "other_cpu_share": max(
                0.0,
                (self.system_busy - self.server_cpu - self.client_cpu - self.store_cpu)
                / self.duration,
            ),
        }


async def run_load(
    host: str,
    port: int,
    workload: Workload,
    *,
    server: str,
    server_pid: int,
    connections: int = 16,
    warmup: float = 2.0,
    duration: float = 10.0,
    store_pid: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> RunResult:
    """Warm up, then measure ``duration`` seconds of back-to-back calls on every connection;
    ``headers`` go with every request (``Authorization``, for a server with auth)."""
    result = RunResult(workload.key, server, connections, duration)
    measuring = False
    stop = False
    t_start = 0.0
    t_end = float("inf")

    def on_round() -> None:
        if measuring and time.perf_counter() <= t_end:
            result.rounds += 1

    async def worker() -> None:
        conn = Connection(host, port, headers=headers)
        caller = Caller(conn, workload, on_round)
        try:
            while not stop:
                started = time.perf_counter()
                try:
                    outcome = await caller.call()
                except (OSError, asyncio.IncompleteReadError, HTTPError, ValueError) as exc:
                    conn.close()
                    outcome = CallOutcome(False, 0, [], f"{type(exc).__name__}: {exc}")
                ended = time.perf_counter()
                if not outcome.ok:  # a failure fails the run, warm-up and tail included
                    result.failures += 1
                    if len(result.first_errors) < 5:
                        where = "" if measuring else "warm-up: "
                        result.first_errors.append(where + (outcome.error or "?"))
                    if measuring and ended > t_end:
                        break
                    continue
                if not measuring:
                    continue
                if t_start <= started < t_end:
                    # Latencies by start time: every call started in the window is timed however
                    # long it runs, so long calls are not under-sampled at the window's edges.
                    result.latencies.append(ended - started)
                if ended > t_end:
                    break  # calls/s counts the calls that ended in the window
                result.calls += 1
                result.tokens.extend(outcome.tokens)
                if len(outcome.tokens) > 1:
                    result.token_after_first_answer.append(outcome.tokens[1])
        finally:
            conn.close()

    tasks = [asyncio.ensure_future(worker()) for _ in range(connections)]
    await asyncio.sleep(warmup)
    cpu0 = process_cpu_seconds(server_pid)
    waiting0 = run_queue_seconds(server_pid)
    store0 = process_cpu_seconds(store_pid) if store_pid else 0.0
    client0 = time.process_time()
    busy0 = system_busy_seconds()
    t_start = time.perf_counter()
    t_end = t_start + duration
    measuring = True
    await asyncio.sleep(duration)
    cpu1 = process_cpu_seconds(server_pid)
    waiting1 = run_queue_seconds(server_pid)
    store1 = process_cpu_seconds(store_pid) if store_pid else 0.0
    client1 = time.process_time()
    busy1 = system_busy_seconds()
    stop = True
    done, pending = await asyncio.wait(tasks, timeout=30)
    for task in pending:
        task.cancel()
    for task in done:
        exc = task.exception()
        if exc is not None:
            result.failures += 1
            result.first_errors.append(f"worker crashed: {exc!r}")
    result.server_cpu = cpu1 - cpu0
    result.server_waiting = waiting1 - waiting0
    result.client_cpu = client1 - client0
    result.store_cpu = store1 - store0
    result.system_busy = busy1 - busy0
    return result


def new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()
