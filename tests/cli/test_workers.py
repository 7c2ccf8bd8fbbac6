"""``python -m engine serve FILE --workers N``: N processes on one port, one server to clients.

Each test serves the bookshop example in two worker processes, with the default SQLite store
(in the test's own data directory) or a Redis of its own prefix, and speaks 2026-07-28 HTTP to
it. A client connection stays with the worker that accepted it, so the tests hold one keep-alive
connection per worker (found by the ``x-engine-replica`` header) and send each round where they
choose: round 1 to one worker, round 2 to the other, the same round again to the first.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from engine.cli.workers import worker_count
from tests.cli.test_dev import descendants, environment, running_pids
from tests.fleet_helpers import ROOT, free_port
from tests.http_helpers import assert_result, call, first_round, post, retry, text_of

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.timeout(300),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

START_TIMEOUT = 60.0
STOP_TIMEOUT = 40.0
CALLS = 40
BACKORDERED = "Backordered 'Neuromancer'; it ships in 2-3 weeks."


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    url: str
    output: Path
    env: dict[str, str]
    folder: Path

    def said(self) -> str:
        return self.output.read_text(errors="replace")

    def worker_pids(self) -> dict[int, int]:
        """Each worker's current pid, by its number, as the supervisor logged them."""
        found: dict[int, int] = {}
        for number, pid in re.findall(r"worker (\d+) started: pid (\d+)", self.said()):
            found[int(number)] = int(pid)
        return found

    def engine(self, *args: str) -> Any:
        """``python -m engine ARGS --json`` as the same user (data directory, kept keys)."""
        done = subprocess.run(
            [sys.executable, "-m", "engine", *args, "--json"],
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


@contextlib.contextmanager
def serving(folder: Path, *args: str, workers: int = 2) -> Iterator[Served]:
    """``serve bookshop.py:build --workers N ARGS`` until every worker has started and the port
    answers; SIGTERM at the end if still running (and SIGKILL to its group if that fails)."""
    port = free_port()
    output = folder / "serve.log"
    env = environment(folder / "home", PYTHONPATH=str(ROOT))
    command = [
        sys.executable,
        "-m",
        "engine",
        "serve",
        f"{ROOT / 'examples' / 'bookshop.py'}:build",
        "--workers",
        str(workers),
        "--port",
        str(port),
        *args,
    ]
    with output.open("wb") as sink:
        process = subprocess.Popen(
            command,
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    served = Served(process, f"http://127.0.0.1:{port}/mcp", output, env, folder)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while served.said().count("serving MCP on") < workers:
            assert process.poll() is None, served.said()
            assert time.monotonic() < deadline, served.said()
            time.sleep(0.1)
        yield served
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(STOP_TIMEOUT)
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def until(condition: Callable[[], bool], seconds: float, served: Served) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, served.said()
        time.sleep(0.1)


@contextlib.asynccontextmanager
async def clients_of_each_worker(
    served: Served, each: int = 1, workers: int = 2
) -> AsyncIterator[dict[str, list[httpx.AsyncClient]]]:
    """``each`` clients per worker, by replica id: a client keeps one connection, so every
    request it sends reaches the worker that accepted it. New connections are made until each
    worker has its clients."""
    base = served.url.removesuffix("/mcp")
    found: dict[str, list[httpx.AsyncClient]] = {}
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(400):
            client = await stack.enter_async_context(
                httpx.AsyncClient(
                    base_url=base,
                    limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
                    timeout=30,
                )
            )
            answer = await post(client, call("order_book", {"title": "Dune"}))
            mine = found.setdefault(answer.headers["x-engine-replica"], [])
            if len(mine) < each:
                mine.append(client)
            else:
                await client.aclose()
            if len(found) == workers and all(len(kept) == each for kept in found.values()):
                break
        assert len(found) == workers, f"reached only {sorted(found)} in 400 connections"
        assert all(len(kept) == each for kept in found.values()), "too few connections each"
        yield found


async def order_across(first: httpx.AsyncClient, second: httpx.AsyncClient) -> dict[str, Any]:
    """``order_book('Neuromancer')``: round 1 on ``first``'s worker, round 2 on ``second``'s;
    the second round's request, its raw response and the result."""
    started = await first_round(first)
    body = retry(started["requestState"])
    response = await post(second, body)
    result = assert_result(response)
    assert text_of(result) == BACKORDERED
    return {"body": body, "response": response}


JOURNALED_TIMEOUT = 30.0
"""Seconds, generously, until a call's rounds are in the journal: a round whose call went on on
another worker waits a second in its writer for the call's end."""


def two_rounds(served: Served, *args: str) -> list[dict[str, Any]]:
    """The calls of ``order_book`` the journal lists with both rounds."""
    listed = served.engine("calls", *args, "--tool", "order_book", "--limit", "500")
    return [c for c in listed if c["rounds"] == 2]


def rounds_of(served: Served, call_id: str) -> list[tuple[int, str, str]]:
    """``(round, kind, replica)`` of each recorded round of a call, from ``show --json``, by
    round: each worker's journal writer appends on its own, so round 1's event may be appended
    after round 2's."""
    shown = served.engine("show", call_id)
    return sorted((event["round"], event["kind"], event["replica"]) for event in shown["events"])


async def test_two_workers_serve_rounds_single_use_and_journal_every_call(
    tmp_path: Path,
) -> None:
    with serving(tmp_path) as served:
        assert "store: sqlite:///" in served.said()
        async with clients_of_each_worker(served, each=4) as clients:
            (one, on_one), (two, on_two) = sorted(clients.items())
            assert one.endswith("-w1") and two.endswith("-w2")
            last: dict[str, Any] = {}

            async def orders(a: httpx.AsyncClient, b: httpx.AsyncClient) -> None:
                # both workers write the one SQLite file at once, from 4 connections
                nonlocal last
                for n in range(CALLS // 4):
                    last = await order_across(a, b) if n % 2 == 0 else await order_across(b, a)

            async with anyio.create_task_group() as group:
                for a, b in zip(on_one, on_two, strict=True):
                    group.start_soon(orders, a, b)
            # a round 2 sent again to the worker that did not serve it is not run again but
            # answered with the first response, byte for byte
            served_by = last["response"].headers["x-engine-replica"]
            elsewhere = on_two[0] if served_by == one else on_one[0]
            again = await post(elsewhere, last["body"])
            assert again.headers["x-engine-replica"] != served_by
            assert again.content == last["response"].content
            # and with other answers it is refused: a round is used once
            other = retry(
                last["body"]["params"]["requestState"],
                {"confirm_backorder": {"action": "accept", "content": {"confirm": False}}},
            )
            refused = await post(elsewhere, other)
            assert refused.status_code == 400
            assert refused.json()["error"]["code"] == -32602

        # a round 1 whose call went on elsewhere waits in its writer for the call's end first
        until(lambda: len(two_rounds(served)) == CALLS, JOURNALED_TIMEOUT, served)
        two_round = two_rounds(served)
        replicas: set[str] = set()
        for listed_call in two_round[:4]:
            (_, kind_1, replica_1), (_, kind_2, replica_2) = rounds_of(
                served, listed_call["call_id"]
            )
            assert (kind_1, kind_2) == ("input_required", "complete")
            assert replica_1 != replica_2  # each call crossed workers
            replicas |= {replica_1, replica_2}
        assert replicas == {one, two}


async def test_a_killed_worker_is_started_again_and_sigterm_leaves_no_process(
    tmp_path: Path,
) -> None:
    with serving(tmp_path) as served:
        async with clients_of_each_worker(served) as clients:
            (one, [a]), _ = sorted(clients.items())
            started = await first_round(a)  # round 1 on worker 1, which then dies
        killed = served.worker_pids()[1]
        os.kill(killed, signal.SIGKILL)
        until(
            lambda: served.worker_pids()[1] != killed and served.said().count("serving MCP") == 3,
            START_TIMEOUT,
            served,
        )
        assert re.search(
            rf"worker 1 \(pid {killed}, replica {re.escape(one)}\) exited \(killed by SIGKILL\); "
            r"starting it again in 0\.5s",
            served.said(),
        ), served.said()
        # dying again soon after starting, it waits twice as long
        killed = served.worker_pids()[1]
        os.kill(killed, signal.SIGKILL)
        until(
            lambda: served.worker_pids()[1] != killed and served.said().count("serving MCP") == 4,
            START_TIMEOUT,
            served,
        )
        again = (
            f"worker 1 (pid {killed}, replica {one}) exited (killed by SIGKILL); starting it again"
        )
        assert f"{again} in 1s" in served.said()
        async with clients_of_each_worker(served) as clients:
            assert one in clients  # the new process serves as worker 1 again
            # the call begun on the dead worker goes on wherever its round 2 lands
            for [client] in clients.values():
                result = assert_result(await post(client, retry(started["requestState"])))
                assert text_of(result) == BACKORDERED
                assert result["resultType"] == "complete"

        started_pids = descendants(served.process.pid)
        assert len(started_pids) == 2
        served.process.send_signal(signal.SIGTERM)
        assert served.process.wait(STOP_TIMEOUT) == 0, served.said()
        with contextlib.suppress(AssertionError):
            until(lambda: not running_pids(started_pids), 10, served)
        assert running_pids(started_pids) == set()


async def test_two_workers_on_redis_share_rounds(tmp_path: Path, redis_url: str) -> None:
    with serving(tmp_path, "--store", redis_url) as served:
        assert "the workers share the SQLite store" not in served.said()
        async with clients_of_each_worker(served) as clients:
            (_, [a]), (_, [b]) = sorted(clients.items())
            for n in range(10):
                first, second = (a, b) if n % 2 == 0 else (b, a)
                last = await order_across(first, second)
            again = await post(b, last["body"])
            assert again.content == last["response"].content
        until(
            lambda: len(two_rounds(served, "--store", redis_url)) == 10, JOURNALED_TIMEOUT, served
        )


async def test_the_workers_stop_when_serve_is_killed_outright(tmp_path: Path) -> None:
    with serving(tmp_path) as served:
        started_pids = descendants(served.process.pid)
        assert len(started_pids) == 2
        served.process.kill()  # SIGKILL: no handler runs, serve cannot stop them itself
        served.process.wait()
        with contextlib.suppress(AssertionError):
            until(lambda: not running_pids(started_pids), STOP_TIMEOUT, served)
        assert running_pids(started_pids) == set()


# --- what --workers refuses -----------------------------------------------------------------------


def refused(folder: Path, *args: str) -> str:
    """``serve bookshop.py:build ARGS``, which must fail at once: its last line."""
    done = subprocess.run(
        [
            *(sys.executable, "-m", "engine", "serve"),
            f"{ROOT / 'examples' / 'bookshop.py'}:build",
            *args,
            *("--port", str(free_port())),
        ],
        cwd=folder,
        env=environment(folder / "home", PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    return done.stderr.splitlines()[-1]


def test_workers_refuse_a_store_each_process_would_keep_alone(tmp_path: Path) -> None:
    said = refused(tmp_path, "--workers", "2", "--store", "memory://")
    assert said.startswith("error: --workers 2 needs a store the workers share, and memory://")
    assert "a requestState could be used once on each worker" in said
    said = refused(tmp_path, "--workers", "2", "--store", "none")
    assert said.startswith("error: --workers 2 needs a store the workers share, and this server")


def test_workers_refuse_stdio_reload_and_a_count_that_is_not_one(tmp_path: Path) -> None:
    assert refused(tmp_path, "--workers", "2", "--stdio") == (
        "error: --workers serves HTTP on one port: a host that starts a server over stdio talks "
        "to that one process; drop --stdio, or --workers"
    )
    assert refused(tmp_path, "--workers", "2", "--reload").startswith(
        "error: --workers and --reload do not go together"
    )
    assert refused(tmp_path, "--workers", "0").startswith(
        "error: --workers 0: give a number of processes, 1 or more, or auto"
    )


def test_workers_auto_is_one_per_core_this_process_may_use() -> None:
    assert worker_count("auto") == len(os.sched_getaffinity(0))
    assert worker_count("3") == 3
