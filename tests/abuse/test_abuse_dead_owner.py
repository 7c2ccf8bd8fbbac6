"""A replica killed mid-round does not hold its round for long: two ``python -m engine serve``
replicas share the suite's Redis; the round's body blocks on replica A, A is killed with
SIGKILL, and retries of the same round on replica B take it over within the worst case
docs/deployment.md states (the default ``claim_lease`` plus ``duplicate_wait``).
"""

import contextlib
import json
import os
import signal
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import KEY, redis_for_tests
from tests.fleet_helpers import engine_fleet
from tests.http_helpers import headers_for, request

CLAIM_LEASE = 10.0
DUPLICATE_WAIT = 2.0
WORST_CASE = CLAIM_LEASE + DUPLICATE_WAIT
"""docs/deployment.md: how long after its owner died a retry may wait to run a round."""
SLACK = 3.0
"""Process scheduling on a shared machine: a bound on a hang, not a measurement."""

SERVER = """
import os
import sys
import time
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel

from engine import Elicit, MCPServer, Resolve

mcp = MCPServer("Lease")
STARTED = Path(os.environ["LEASE_STARTED"])


class Go(BaseModel):
    go: bool


def ask_go() -> Elicit[Go]:
    return Elicit("Go?", Go)


@mcp.tool()
def slow(go: Annotated[Go, Resolve(ask_go)]) -> str:
    replica = sys.argv[sys.argv.index("--replica") + 1]
    STARTED.write_text(replica)
    if replica == "a":
        time.sleep(3600)  # blocked until the replica is killed
    return f"ran on {replica}"
"""

ELICITATION = {"elicitation": {}}


def rounds(state: str | None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "slow", "arguments": {}}
    if state is not None:
        params["inputResponses"] = {"ask_go": {"action": "accept", "content": {"go": True}}}
        params["requestState"] = state
    return request("tools/call", params, capabilities=ELICITATION)


def post(client: httpx.Client, url: str, body: dict[str, Any], timeout: float) -> httpx.Response:
    return client.post(url, content=json.dumps(body), headers=headers_for(body), timeout=timeout)


def started_on(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_a_round_of_a_killed_replica_is_taken_over_within_the_stated_worst_case(
    tmp_path: Path,
) -> None:
    redis_url = f"{redis_for_tests()}?prefix=dead-owner-{os.urandom(4).hex()}"
    app = tmp_path / "lease_app.py"
    app.write_text(textwrap.dedent(SERVER))
    started = tmp_path / "started"
    env = {"ENGINE_STORE": redis_url, "LEASE_STARTED": str(started)}
    with engine_fleet(str(app), {"a": KEY, "b": KEY}, tmp_path / "logs", extra_env=env) as fleet:
        a, b = fleet["a"], fleet["b"]
        with httpx.Client() as client:
            first = post(client, a.url, rounds(None), timeout=10).json()["result"]
            assert first["resultType"] == "input_required", first
            state = first["requestState"]
            with contextlib.suppress(httpx.ReadTimeout):  # round 2 on A: its body blocks
                post(client, a.url, rounds(state), timeout=1.0)
            deadline = time.monotonic() + 10
            while started_on(started) != "a":
                assert time.monotonic() < deadline, a.log_tail()
                time.sleep(0.02)
            a.process.send_signal(signal.SIGKILL)
            a.process.wait(10)
            killed = time.monotonic()

            answers = []
            while True:  # what a client does with a state-only "retry" answer: retry
                waited = time.monotonic() - killed
                assert waited < WORST_CASE + SLACK, (
                    f"no takeover {waited:.1f}s after the owner died: {answers}\n{b.log_tail()}"
                )
                reply = post(client, b.url, rounds(state), timeout=WORST_CASE + SLACK)
                assert reply.status_code == 200, reply.text
                result = reply.json()["result"]
                if result.get("resultType") != "input_required":
                    break
                answers.append(f"retry at {time.monotonic() - killed:.1f}s")
                state = result["requestState"]
    assert result["content"][0]["text"] == "ran on b", result
    assert started.read_text() == "b"
