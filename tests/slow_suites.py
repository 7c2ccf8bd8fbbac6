"""Which slow suites (tests/e2e, tests/faults, tests/nemesis) a pytest run collects: all of them
under ``make e2e`` (``ENGINE_E2E=1``), and a folder, or a file in it, named on the command line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def asked_for(config: pytest.Config, folder: Path) -> bool:
    """Whether this run asked for the suite in ``folder``."""
    if os.environ.get("ENGINE_E2E") == "1":
        return True
    for arg in config.args:
        path = Path(arg.split("::")[0]).resolve()
        if path == folder or folder in path.parents:
            return True
    return False
