"""``make conformance``: serve the fixture server on a free port and run the official suite.

Usage: ``python tests/run_conformance.py [SET ...]`` (default: 2026-07-28). A set is a spec
version (every scenario of it), or ``tasks``: the ten scenarios of the Tasks extension, each on
the wire the harness picks for it. Exits non-zero when any scenario fails or warns.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNNER = ROOT.parent / "shared" / "tools" / "run-conformance.sh"
TASK_SCENARIOS = (
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
)
"""The Tasks extension's scenarios; the harness itself skips tasks-status-notifications."""


def runner_arguments(name: str, url: str) -> list[str]:
    """What the runner is given for one set."""
    if name == "tasks":
        scenarios = [arg for scenario in TASK_SCENARIOS for arg in ("--scenario", scenario)]
        return [*scenarios, url, "default"]
    return [url, name]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_listening(port: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"the conformance server did not start on port {port}")


def main(versions: list[str]) -> int:
    if not RUNNER.exists():
        print(f"conformance runner not found at {RUNNER}", file=sys.stderr)
        return 2
    port = free_port()
    env = dict(os.environ, ENGINE_KEYS=secrets.token_hex(32), ENGINE_STORE="memory://")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine",
            "serve",
            "examples/conformance_server.py",
            "--port",
            str(port),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    failed = False
    try:
        wait_listening(port)
        for version in versions:
            url = f"http://127.0.0.1:{port}/mcp"
            run = subprocess.run(
                [str(RUNNER), "--details", *runner_arguments(version, url)],
                capture_output=True,
                text=True,
            )
            print(run.stdout, end="")
            print(run.stderr, end="", file=sys.stderr)
            warned = [
                line
                for line in run.stdout.splitlines()
                if re.match(r"\S+\s+\S+\s+\d+\s+\d+\s+[1-9]", line)
            ]
            if run.returncode != 0 or warned:
                failed = True
                if warned:
                    print("scenarios with warnings:", *warned, sep="\n  ")
    finally:
        server.terminate()
        server.wait(timeout=10)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["2026-07-28"]))
