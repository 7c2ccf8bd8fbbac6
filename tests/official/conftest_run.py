"""The conftest of a run of the official tests (copied to the root of the rewritten tree).

Nothing here stands between the official ``Client`` and this server: given an ``MCPServer`` of
ours, the client uses it as its transport, which the server is (``MCPServer.__aenter__``). This
file leaves out the excluded tests and records each test's outcome for the summary.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The official suite opts into distributed tracing the same way, before logfire is imported.
os.environ.setdefault("LOGFIRE_DISTRIBUTED_TRACING", "true")

RESULTS = os.environ.get("OFFICIAL_RESULTS")
EXCLUDED = os.environ.get("OFFICIAL_EXCLUDED")

_outcomes: dict[str, tuple[str, str]] = {}
"""Each test's outcome and the last line of its failure (or the section that excluded it)."""


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


def _excluded() -> dict[str, str]:
    """Each pattern of excluded.txt, with the section it stands in."""
    return dict(json.loads(EXCLUDED)) if EXCLUDED else {}


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A whole excluded file is not even imported (its module-level code may need internals)."""
    relative = collection_path.relative_to(config.rootpath).as_posix()
    return True if relative in _excluded() else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    patterns = _excluded()
    kept, dropped = [], []
    for item in items:
        section = next((s for p, s in patterns.items() if _matches(item.nodeid, p)), None)
        if section is None:
            kept.append(item)
        else:
            dropped.append(item)
            _outcomes[item.nodeid] = ("excluded", section)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _matches(nodeid: str, pattern: str) -> bool:
    if pattern.endswith("*"):
        return nodeid.startswith(pattern[:-1])
    return nodeid == pattern or nodeid.startswith((pattern + "[", pattern + "::"))


def _reason(report: pytest.BaseReport) -> str:
    """The last line of a failure: the exception and its message."""
    text = str(report.longrepr or "").strip().splitlines()
    return text[-1][:300] if text else ""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" or report.outcome != "passed":
        previous = _outcomes.get(item.nodeid)
        if previous is None or previous[0] == "passed":
            _outcomes[item.nodeid] = (report.outcome, _reason(report))


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.outcome == "failed":
        _outcomes[report.nodeid] = ("error", _reason(report))


def pytest_sessionfinish(session: pytest.Session) -> None:
    if RESULTS:
        Path(RESULTS).write_text(json.dumps(_outcomes, indent=1), encoding="utf-8")
