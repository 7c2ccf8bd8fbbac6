"""End-to-end tests on a real fleet: nginx, three ``python -m engine serve`` replicas, Redis.

The fleet tests (marked ``e2e``) start processes and take a minute, so a plain ``pytest`` (the
default ``make test``) does not collect them; ``test_compose.py`` is fast and always runs. They
run with ``make e2e`` (``ENGINE_E2E=1``), or when ``tests/e2e`` or one of its files is named on
the command line. At the end of the session the numbers are printed: calls, rounds, replicas
hit, duplicate executions, duplicates served from the store, failures; and a "legacy calls" row
for the 2025-11-25 sessions of ``test_legacy_fleet.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from deploy.fleet import Fleet
from tests.e2e.driver import REPORT
from tests.slow_suites import asked_for

HERE = Path(__file__).resolve().parent
FLEET_MODULES = {"test_fleet.py", "test_faults.py", "test_legacy_fleet.py", "test_tasks_fleet.py"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: starts a real fleet (nginx, replicas, Redis)")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.name in FLEET_MODULES and not asked_for(config, HERE):
        return True
    return None


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    """Three replicas behind nginx on the machine's Redis (private key prefix) or a fresh one."""
    with Fleet(redis="auto", workdir=tmp_path / "fleet") as started:
        yield started


@pytest.fixture
def durable_fleet(tmp_path: Path) -> Iterator[Fleet]:
    """The same on a private redis-server with ``--appendonly yes --appendfsync always``."""
    with Fleet(redis="private", workdir=tmp_path / "fleet") as started:
        yield started


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not REPORT:
        return
    write = terminalreporter.write_line
    terminalreporter.section("fleet end-to-end numbers")
    header = (
        f"{'test':<34} {'calls':>5} {'rounds':>6} {'replicas hit':>12} {'across':>6} "
        f"{'dup runs':>8} {'dup served':>10} {'failures':>8}"
    )
    write(header)
    for row in REPORT:
        write(
            f"{row.test:<34} {row.calls:>5} {row.rounds:>6} {row.replicas_hit:>12} "
            f"{row.calls_across_replicas:>6} {row.duplicate_executions:>8} "
            f"{row.duplicates_served:>10} {row.failures:>8}"
        )
        if row.note:
            write(f"    {row.note}")
    total_calls = sum(r.calls for r in REPORT)
    write(
        f"total: {total_calls} calls, {sum(r.rounds for r in REPORT)} rounds, "
        f"{sum(r.duplicate_executions for r in REPORT)} duplicate executions, "
        f"{sum(r.failures for r in REPORT)} failures"
    )
    legacy = [r.legacy for r in REPORT if r.legacy is not None]
    if legacy:
        waits = [s for tally in legacy for s in tally.seconds_to_error]
        died = sum(t.ended_by_dead_replica for t in legacy)
        write(
            f"legacy calls (2025-11-25, mode='legacy'): {sum(t.calls for t in legacy)} calls in "
            f"{sum(t.sessions for t in legacy)} sessions, {sum(t.completed for t in legacy)} "
            f"completed, {died} ended with -32603 when their replica died"
            + (f" ({min(waits):.1f}-{max(waits):.1f}s after the kill)" if waits else "")
            + f"; {sum(t.answers for t in legacy)} answers posted, "
            f"{sum(t.answers_elsewhere for t in legacy)} to a replica not holding the call; "
            f"{sum(t.sessions_across for t in legacy)} sessions served by >= 2 replicas"
        )
