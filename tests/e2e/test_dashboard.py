"""deploy/grafana-dashboard.json against the metrics a replica serves: every series a panel
queries is one ``/metrics`` exposes (a renamed metric would leave a panel silently empty), and
every metric has a panel. Offline, so it runs in the default ``make test``."""

from __future__ import annotations

import json
import re
from pathlib import Path

from engine._internal.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = json.loads((ROOT / "deploy" / "grafana-dashboard.json").read_text())
SERIES = re.compile(r"\b(engine_[a-z_]+)")


def served() -> set[str]:
    metrics = Metrics()
    metrics.round_served("tools/call", "complete", 0.002)
    metrics.store_operation("claim", 0.0003)
    return {
        line.split()[2] for line in metrics.exposition().splitlines() if line.startswith("# TYPE")
    }


def queried() -> set[str]:
    return {
        name
        for panel in DASHBOARD["panels"]
        for target in panel["targets"]
        for name in SERIES.findall(target["expr"])
    }


def family(series: str) -> str:
    """The metric a series belongs to (a histogram's ``_bucket``, ``_sum``, ``_count``)."""
    return re.sub(r"_(bucket|sum|count)$", "", series)


def test_every_queried_series_is_served() -> None:
    assert {family(s) for s in queried()} <= served()


def test_every_served_metric_has_a_panel() -> None:
    assert served() <= {family(s) for s in queried()}


def test_panels_do_not_overlap() -> None:
    cells: set[tuple[int, int]] = set()
    for panel in DASHBOARD["panels"]:
        grid = panel["gridPos"]
        mine = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & mine, panel["title"]
        assert grid["x"] + grid["w"] <= 24
        cells |= mine
