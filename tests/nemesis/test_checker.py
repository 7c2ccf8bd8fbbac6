"""The checker on histories written by hand: each violation it exists for is found, and a clean
history passes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from examples.fleet_server import record_effect
from tests.nemesis.checker import Effect, check, read_effects
from tests.nemesis.history import History, Op, load

DONE = {
    "content": [{"type": "text", "text": "c1 done on fleet-1 after 0s"}],
    "resultType": "complete",
}


def op(kind: str, f: str, key: str, time: float, **value: Any) -> Op:
    return Op(f"{f}-{key}", kind, f, key, time, value)  # type: ignore[arg-type]


def task_completed(tag: str, at: float) -> list[Op]:
    return [
        op("invoke", "task", tag, at),
        op(
            "ok",
            "task",
            tag,
            at + 3,
            task_id="T1",
            status="completed",
            text=f"{tag} done (hold ab, finished on fleet-2)",
            waited=2.5,
        ),
    ]


def call_acknowledged(tag: str, at: float, replayed: dict[str, Any] = DONE) -> list[Op]:
    return [
        op("invoke", "call", tag, at),
        op("ok", "call", tag, at + 0.1, result=DONE),
        op("invoke", "replay", tag, at + 5),
        op("ok", "replay", tag, at + 5.1, result=replayed),
    ]


def effects_of(tag: str) -> list[Effect]:
    return [Effect("fleet-1", "task-once", tag), Effect("fleet-2", "task-done", tag)]


def test_a_clean_history_passes_and_its_longest_stall_is_measured() -> None:
    history = task_completed("t1", 0.0) + call_acknowledged("c1", 1.0)
    verdict = check(sorted(history, key=lambda o: o.time), effects_of("t1"))
    assert verdict.ok, verdict.report()
    # successes at 1.1 (the call), 3.0 (the task), 6.1 (the replay): the longest gap is the last
    assert verdict.longest_stall == pytest.approx(3.1) and verdict.stall_at == 3.0
    assert verdict.slowest_task == 2.5
    assert verdict.counts["tasks completed"] == 1 and verdict.counts["calls ok"] == 1


def test_a_once_step_that_ran_twice_is_a_violation() -> None:
    effects = [*effects_of("t1"), Effect("fleet-3", "task-done", "t1")]
    verdict = check(task_completed("t1", 0.0), effects)
    assert not verdict.ok
    assert verdict.duplicates == {"t1": {"task-done": 2}}
    assert "duplicate once steps: 1" in verdict.report()


def test_an_acknowledged_call_replayed_to_another_result_is_lost() -> None:
    other = {**DONE, "content": [{"type": "text", "text": "c1 done on fleet-3 after 0s"}]}
    verdict = check(call_acknowledged("c1", 0.0, replayed=other), [])
    assert not verdict.ok
    assert list(verdict.lost) == ["c1"]


def test_an_acknowledged_call_whose_replay_is_refused_is_lost() -> None:
    refused = {"code": -32602, "message": "Invalid requestState"}
    history = [*call_acknowledged("c1", 0.0)[:3], op("fail", "replay", "c1", 5.1, error=refused)]
    verdict = check(history, [])
    assert list(verdict.lost) == ["c1"] and "Invalid requestState" in verdict.lost["c1"]


def test_a_task_still_working_when_the_run_gave_up_is_unclear() -> None:
    history = [
        op("invoke", "task", "t1", 0.0),
        op("info", "task", "t1", 90.0, task_id="T1", status="working", last={"status": "working"}),
    ]
    verdict = check(history, [Effect("fleet-1", "task-once", "t1")])
    assert not verdict.ok
    assert list(verdict.unclear) == ["t1"]


def test_a_task_completed_without_its_done_line_is_unclear() -> None:
    verdict = check(task_completed("t1", 0.0), [Effect("fleet-1", "task-once", "t1")])
    assert verdict.unclear == {"t1": "completed, but its done step left no line"}


def test_a_task_failed_with_a_message_is_clear_and_one_never_made_is_not_asked_about() -> None:
    history = [
        op("invoke", "task", "t1", 0.0),
        op(
            "fail",
            "task",
            "t1",
            30.0,
            task_id="T1",
            status="failed",
            error="the task was taken over 4 times",
        ),
        op("invoke", "task", "t2", 1.0),
        op("info", "task", "t2", 2.0, task_id=None, error="HTTP 502"),
    ]
    verdict = check(history, [Effect("fleet-1", "task-once", "t1")])
    assert verdict.ok, verdict.report()
    assert verdict.counts["tasks failed"] == 1


def test_effects_are_read_from_the_lines_the_fleet_server_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEET_EFFECTS_DIR", str(tmp_path))
    record_effect("fleet-1", "task-once", "t1", "ab12")
    record_effect("fleet-2", "task-done", "t1")
    record_effect("fleet-3", "task-done", "t1")
    effects = read_effects(tmp_path)
    assert sorted(effects, key=lambda e: e.replica) == [
        Effect("fleet-1", "task-once", "t1"),
        Effect("fleet-2", "task-done", "t1"),
        Effect("fleet-3", "task-done", "t1"),
    ]
    assert check(task_completed("t1", 0.0), effects).duplicates == {"t1": {"task-done": 2}}


def test_a_history_written_to_a_file_reads_back_the_same(tmp_path: Path) -> None:
    history = History(tmp_path / "history.jsonl")
    history.add("call-c1", "invoke", "call", "c1")
    history.add("call-c1", "ok", "call", "c1", result=DONE)
    assert load(tmp_path / "history.jsonl") == history.ops


def test_what_each_fault_cost_is_its_longest_stall_and_the_requests_that_failed_meanwhile() -> None:
    history = [
        op("invoke", "call", "c1", 0.0),
        op("ok", "call", "c1", 1.0, result=DONE),
        Op("nemesis", "invoke", "fault", "redis", 2.0, {}),
        op("invoke", "call", "c2", 2.5),
        Op("call-c2", "info", "transit", "HTTP 503", 3.0, {}),
        Op("call-c2", "info", "transit", "HTTP 503", 4.0, {}),
        Op("nemesis", "ok", "fault", "redis", 5.0, {}),
        op("ok", "call", "c2", 7.5, result=DONE),
        *(op("ok", "call", f"d{at}", at, result=DONE) for at in range(9, 40, 2)),  # steady load
        Op("nemesis", "invoke", "fault", "kill", 40.0, {}),
        Op("call-c3", "info", "transit", "HTTP 502", 41.0, {}),
        Op("nemesis", "ok", "fault", "kill", 42.0, {}),
        op("ok", "call", "c3", 43.0, result=DONE),
        op("ok", "task", "t1", 44.0, task_id="T1", status="completed", text="t1 done", waited=9.5),
    ]
    costs = check(history, []).costs
    assert costs["redis"].times == 1 and costs["redis"].errors == {"HTTP 503": 2}
    assert costs["redis"].longest_stall == pytest.approx(5.5)  # from the fault's start to c2's ack
    assert costs["kill"].errors == {"HTTP 502": 1}
    assert costs["kill"].longest_stall == pytest.approx(3.0)
    assert costs["redis"].slowest_call == pytest.approx(5.0)  # c2: from 2.5 to 7.5
    assert costs["kill"].slowest_task == 9.5 and costs["redis"].slowest_task == 0
