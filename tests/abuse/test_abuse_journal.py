"""The journal of a served replica keeps what the code validated, sealed, and within its cap.

One ``python -m engine serve`` with a SQLite store in a temporary directory; calls over HTTP;
then the store file's own bytes and the journal commands as an operator runs them. An answer
padded with megabytes of fields nobody asked for is kept without them; a result over the cap is
journaled truncated, and replay says it cannot replay it; no argument, answer or result is in the
file in the clear; the default settings journal what a replay needs; a record sealed with a key
still in the ring opens, and one whose key left the ring is refused with what to pass.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import KEY, OTHER_KEY
from tests.fleet_helpers import ROOT, free_port, healthy_until_stopped
from tests.http_helpers import call, headers_for, request

ARGUMENT = "ARGUMENT-CANARY-7f3a"
ANSWER = "ANSWER-CANARY-51c2"
RESULT = "RESULT-CANARY-0d9e"
JUNK = "J" * 1_500_000
"""Padding a client adds beside the answer and inside its content: 3 MB a round."""
STORE_BUDGET = 512 * 1024
"""What the store file may grow to for these few calls: far below one junk answer."""
BIG_RESULT = 2_000_000
"""A result's size: over the journal's default cap of 64 KiB."""

APP = """
from typing import Annotated

from pydantic import BaseModel

from engine import Context, MCPServer

class Note(BaseModel):
    note: str

mcp = MCPServer("Journal")

@mcp.tool()
async def order(title: str, ctx: Context) -> str:
    first = await ctx.elicit(f"Order {title}?", Note)
    second = await ctx.elicit("Gift wrap?", Note)
    return f"ordered {title}: {first.data.note} {second.data.note} RESULT-CANARY-0d9e"

@mcp.tool()
async def big(size: int) -> str:
    return "B" * size
"""

REDACTED_APP = """
from typing import Annotated

from engine import MCPServer, Redacted

mcp = MCPServer("Vault")

@mcp.tool()
async def unlock(user: str, pin: Annotated[str, Redacted()]) -> str:
    return f"unlocked for {user}" if len(pin) == 23 else "wrong pin"
"""
PIN = "PIN-CANARY-a81b-9931-xx"


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return {**env, **extra}


@dataclass
class Served:
    url: str
    store: str
    path: Path
    app: Path
    log: Path

    def post(self, body: dict[str, Any]) -> dict[str, Any]:
        content = json.dumps(body).encode()
        with httpx.Client(trust_env=False, timeout=30) as http:
            response = http.post(self.url, content=content, headers=headers_for(body))
        assert response.status_code == 200, response.text[:500]
        result: dict[str, Any] = response.json()["result"]
        return result

    def stored_bytes(self) -> bytes:
        """The store as it sits on disk: the file, its write-ahead log and shared memory."""
        files = [self.path.with_name(self.path.name + s) for s in ("", "-wal", "-shm")]
        return b"".join(f.read_bytes() for f in files if f.exists())

    def engine(self, *args: str, keys: str = KEY) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "engine", *args, "--store", self.store],
            cwd=ROOT,
            env=environment(ENGINE_KEYS=keys),
            capture_output=True,
            text=True,
            timeout=60,
        )


@contextlib.contextmanager
def serving(app_text: str, directory: Path) -> Iterator[Served]:
    """``python -m engine serve`` with every setting at its default but the keys and store."""
    app = directory / "app.py"
    app.write_text(app_text)
    path = directory / "calls.sqlite3"
    store = f"sqlite:///{path}"
    port = free_port()
    log_path = directory / "serve.log"
    serve = ["serve", str(app), "--port", str(port), "--store", store]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "engine", *serve],
            cwd=ROOT,
            env=environment(ENGINE_KEYS=KEY),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    with healthy_until_stopped(process, port, log_path):
        yield Served(f"http://127.0.0.1:{port}/mcp", store, path, app, log_path)


ELICITATION = {"elicitation": {}}


def answered(note: str, padding: str = "") -> dict[str, Any]:
    answer: dict[str, Any] = {"action": "accept", "content": {"note": note}}
    if padding:
        answer["content"]["padding"] = padding
        answer["padding"] = padding
    return answer


def order_call(served: Served, padding: str = "") -> str:
    """The three rounds of ``order``, each answer padded; the call id."""
    arguments = {"title": ARGUMENT}
    first = served.post(call("order", arguments, capabilities=ELICITATION))
    assert first["resultType"] == "input_required", first
    [key] = first["inputRequests"]
    params = {
        "name": "order",
        "arguments": arguments,
        "inputResponses": {key: answered(ANSWER, padding)},
        "requestState": first["requestState"],
    }
    second = served.post(request("tools/call", params, capabilities=ELICITATION))
    assert second["resultType"] == "input_required", second
    [key] = second["inputRequests"]
    params["inputResponses"] = {key: answered("wrapped", padding)}
    params["requestState"] = second["requestState"]
    done = served.post(request("tools/call", params, capabilities=ELICITATION))
    assert done.get("isError") is not True, done
    assert done["content"][0]["text"] == f"ordered {ARGUMENT}: {ANSWER} wrapped {RESULT}"
    return latest(served)


def latest(served: Served, after: str | None = None) -> str:
    """The call journaled last, once it is not ``after`` (waiting a moment for the journal
    writers, which batch)."""
    deadline = time.monotonic() + 10
    while True:
        listed = served.engine("calls", "--json", "--limit", "1")
        assert listed.returncode == 0, listed.stderr
        calls = json.loads(listed.stdout)
        if calls and calls[0]["call_id"] != after:
            return str(calls[0]["call_id"])
        assert time.monotonic() < deadline, "nothing new journaled"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(APP, tmp_path_factory.mktemp("journal")) as running:
        yield running


@pytest.fixture(scope="module")
def ordered(served: Served) -> str:
    """One ``order`` call with clean answers, served with the default settings."""
    return order_call(served)


def test_junk_beside_an_answer_is_neither_spilled_nor_journaled(served: Served) -> None:
    before = len(served.stored_bytes())
    call_id = order_call(served, padding=JUNK)
    grown = len(served.stored_bytes()) - before
    assert grown < STORE_BUDGET, f"the store grew {grown} bytes for one call"
    shown = served.engine("show", call_id, "--json")
    assert shown.returncode == 0, shown.stderr
    events = json.loads(shown.stdout)["events"]
    kept = [answer for event in events for answer in event["answers"].values()]
    assert kept == [answered(ANSWER), answered("wrapped")]  # as validated, nothing beside


def test_an_oversized_event_is_journaled_truncated_and_replay_says_so(served: Served) -> None:
    before = len(served.stored_bytes())
    result = served.post(call("big", {"size": BIG_RESULT}))
    assert len(result["content"][0]["text"]) == BIG_RESULT  # the client gets all of it
    grown = len(served.stored_bytes()) - before
    assert grown < STORE_BUDGET, f"the store grew {grown} bytes for one call"
    call_id = latest(served)
    shown = served.engine("show", call_id)
    assert shown.returncode == 0, shown.stderr
    assert "TRUNCATED response" in shown.stdout
    assert "cannot be replayed exactly" in shown.stdout
    replayed = served.engine("replay", call_id, "--app", str(served.app))
    assert replayed.returncode == 2, replayed.stdout + replayed.stderr
    assert "journaled TRUNCATED (response:" in replayed.stderr
    assert "cannot be replayed exactly" in replayed.stderr
    assert "journal_max_event_bytes" in replayed.stderr


def test_arguments_left_out_for_their_size_are_said_to_be_so(served: Served) -> None:
    before = latest(served) if served.engine("calls", "--json").stdout.strip() != "[]" else None
    first = served.post(call("order", {"title": "T" * 100_000}, capabilities=ELICITATION))
    assert first["resultType"] == "input_required", first
    shown = served.engine("show", latest(served, after=before))
    assert shown.returncode == 0, shown.stderr
    [line] = [line for line in shown.stdout.splitlines() if line.startswith("  arguments ")]
    assert line.startswith("  arguments (left out of the journal: ")
    assert "over journal_max_event_bytes" in line
    assert "ENGINE_JOURNAL_MAX_EVENT_BYTES" in line
    assert "ENGINE_JOURNAL_ARGUMENTS" not in line  # they are recorded: it is their size


def test_the_store_file_holds_no_argument_answer_or_result_in_the_clear(
    served: Served, ordered: str
) -> None:
    stored = served.stored_bytes()
    assert ordered.encode() in stored  # the call is in there, its payload sealed
    for canary in (ARGUMENT, ANSWER, RESULT):
        assert canary.encode() not in stored, f"{canary} is in the store file in the clear"
    shown = served.engine("show", ordered)  # and the server's keys read it back
    assert shown.returncode == 0, shown.stderr
    assert ARGUMENT in shown.stdout and ANSWER in shown.stdout and RESULT in shown.stdout


def test_a_call_served_with_default_settings_replays_out_of_the_box(
    served: Served, ordered: str
) -> None:
    replayed = served.engine("replay", ordered, "--app", str(served.app))
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "All 3 rounds match the record." in replayed.stdout


def test_a_record_opens_while_its_key_is_in_the_ring_and_not_after(
    served: Served, ordered: str
) -> None:
    rotated = served.engine("show", ordered, keys=f"{OTHER_KEY},{KEY}")  # [new, old]
    assert rotated.returncode == 0, rotated.stderr
    assert ANSWER in rotated.stdout
    retired = served.engine("show", ordered, keys=OTHER_KEY)  # [new]: the old key is gone
    assert retired.returncode == 2, retired.stdout
    assert "sealed with key id" in retired.stderr
    assert "not among the keys given" in retired.stderr
    assert ANSWER not in retired.stdout + retired.stderr


def test_a_redacted_argument_never_reaches_the_store_and_replay_names_it(
    tmp_path: Path,
) -> None:
    with serving(REDACTED_APP, tmp_path) as vault:
        result = vault.post(call("unlock", {"user": ARGUMENT, "pin": PIN}))
        assert result["content"][0]["text"] == f"unlocked for {ARGUMENT}"
        call_id = latest(vault)
        assert PIN.encode() not in vault.stored_bytes()
        refused = vault.engine("replay", call_id, "--app", str(vault.app))
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "'pin'" in refused.stderr and "Redacted()" in refused.stderr
        assert "--args" in refused.stderr
        pin = json.dumps({"pin": PIN})
        given = vault.engine("replay", call_id, "--app", str(vault.app), "--args", pin)
        assert given.returncode == 0, given.stdout + given.stderr
        shown = vault.engine("show", call_id)
        assert ARGUMENT in shown.stdout and PIN not in shown.stdout
        assert "redacted  pin" in shown.stdout
    assert PIN not in vault.log.read_text()
