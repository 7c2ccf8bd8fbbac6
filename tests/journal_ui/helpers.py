"""Real pieces for the journal page's tests: bookshop replicas sharing a SQLite store, the
page itself (``python -m engine journal-ui``), and Chromium driven by Playwright.

The browser is the system's Chromium (``apt-get install chromium``), started by Playwright
from its path: no browser is downloaded (``.ci/run`` installs it).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx
import pytest

from tests.conftest import KEY
from tests.fleet_helpers import ROOT, free_port

T = TypeVar("T")

CHROMIUM = os.environ.get("ENGINE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
BOOKSHOP = "examples/bookshop_server.py"


def chromium() -> str:
    """The browser's path; without one the tests skip, or fail when ``ENGINE_REQUIRE_BROWSER``
    is set (CI sets it: there a skip would hide a test not run)."""
    if not Path(CHROMIUM).is_file():
        why = "no Chromium: apt-get install chromium (or ENGINE_CHROMIUM=/path/to/it)"
        if os.environ.get("ENGINE_REQUIRE_BROWSER"):
            pytest.fail(why)
        pytest.skip(why)
    return CHROMIUM


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    env.update(ENGINE_KEYS=KEY, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


class Served:
    """A ``python -m engine`` process answering HTTP on a loopback port."""

    def __init__(self, args: list[str], env: Mapping[str, str], log: Path, probe: str) -> None:
        self.port = free_port()
        self.log = log
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "engine", *args, "--port", str(self.port)],
                cwd=ROOT,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{self.url}{probe}", timeout=2).raise_for_status()
                return
            except httpx.HTTPError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(log.read_text()) from None
                time.sleep(0.1)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def replica(target: str, name: str, db: Path, log_dir: Path, **env: str) -> Served:
    """``serve TARGET`` on ``db``; ``JOURNAL="1"`` adds ``--journal-ui``."""
    args = ["serve", target, "--store", f"sqlite:///{db}", "--replica", name]
    if env.pop("JOURNAL", None):
        args.append("--journal-ui")
    return Served(args, environment(**env), log_dir / f"{name}.log", "/healthz")


def journal_page(db: Path, log_dir: Path, *extra: str, keys: bool = True) -> Served:
    env = environment()
    if not keys:
        env.pop("ENGINE_KEYS")
        env["XDG_DATA_HOME"] = str(log_dir / "no-data")  # no keys kept by serve either
    args = ["journal-ui", "--store", f"sqlite:///{db}", *extra]
    name = "journal-ui.log" if keys else "journal-ui-nokeys.log"
    return Served(args, env, log_dir / name, "/static/journal.js")


@contextlib.contextmanager
def browser_page() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    path = chromium()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path)
        try:
            context = browser.new_context(
                accept_downloads=True, viewport={"width": 1300, "height": 900}
            )
            page = context.new_page()
            page.set_default_timeout(20_000)
            yield page
        finally:
            browser.close()


def outside_the_browser(work: Callable[[], Awaitable[T]]) -> T:
    """``anyio.run(work)`` on a thread of its own: Playwright's loop runs on the test's."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, work).result()


def export_cli(db: Path, call_id: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "engine", "export", call_id, "--store", f"sqlite:///{db}"],
        cwd=ROOT,
        env=environment(),
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout
