"""``make demo`` runs one order across two real replicas."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_demo_alternates_replicas_and_completes() -> None:
    run = subprocess.run(
        [sys.executable, "examples/demo.py", "--once"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "Round 1, served by replica A:" in run.stdout
    assert "Round 2, served by replica B:" in run.stdout
    assert "Backordered 'Neuromancer'; it ships in 2-3 weeks." in run.stdout
