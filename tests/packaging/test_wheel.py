"""The package as users get it: a wheel built from this checkout, installed into a fresh venv
outside it, serves a two-round call with ``python -m engine serve``.

It builds and installs from the package index (at the versions in ``.ci/constraints.txt``), so
it runs in ``make wheel`` (CI runs it), not in the default ``make test``: set ``ENGINE_WHEEL=1``
to run it here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import httpx2
import pytest

from tests.conftest import KEY
from tests.fleet_helpers import free_port, healthy_until_stopped
from tests.http_helpers import assert_result, call, post, request

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(os.environ.get("ENGINE_WHEEL") != "1", reason="ENGINE_WHEEL=1 runs it"),
]

ROOT = Path(__file__).resolve().parents[2]
CACHES = shutil.ignore_patterns("__pycache__", "*.pyc")
APP = """
from typing import Annotated

from pydantic import BaseModel

from engine import Elicit, MCPServer, Resolve

mcp = MCPServer("Packaged shop")


class Confirm(BaseModel):
    confirm: bool


async def confirmed(title: str) -> Confirm | Elicit[Confirm]:
    return Elicit(f"Order {title}?", Confirm)


@mcp.tool()
async def order_book(title: str, answer: Annotated[Confirm, Resolve(confirmed)]) -> str:
    return f"Ordered {title}." if answer.confirm else "No order."
"""


def run(*command: str | Path, cwd: Path) -> str:
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def clean_env() -> dict[str, str]:
    """This environment without what would let the venv see the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["ENGINE_KEYS"] = KEY
    env.pop("ENGINE_STORE", None)
    return env


def serve(installed: Path, app: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    """``python -m engine serve`` of the venv, in the app's folder, on its default store."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [installed / "python", "-m", "engine", "serve", app.name, "--port", str(port)],
            cwd=app.parent,
            env={**clean_env(), "XDG_DATA_HOME": str(app.parent / "data")},
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def journal_ui(installed: Path, folder: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    """``engine journal-ui`` of the venv, on the default store and keys ``serve`` used."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [installed / "engine", "journal-ui", "--port", str(port)],
            cwd=folder,
            env={**clean_env(), "XDG_DATA_HOME": str(folder / "data")},
            stdout=out,
            stderr=subprocess.STDOUT,
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` of a fresh venv with the wheel of this checkout installed."""
    where = tmp_path_factory.mktemp("wheel")
    source = where / "source"  # a copy: building writes build/ beside the sources
    for package in ("engine", "stores"):
        shutil.copytree(ROOT / package, source / package, ignore=CACHES)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    dist = where / "dist"
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, source, cwd=where)
    wheels = list(dist.glob("mcp_engine-*.whl"))
    assert len(wheels) == 1, wheels
    run(sys.executable, "-m", "venv", where / "venv", cwd=where)
    bin_dir = where / "venv" / "bin"
    constraints = ROOT / ".ci" / "constraints.txt"
    run(bin_dir / "python", "-m", "pip", "install", "-q", "-c", constraints, wheels[0], cwd=where)
    return bin_dir


def test_the_installed_package_is_the_wheel_with_its_type_marker(installed: Path) -> None:
    found = run(
        installed / "python",
        "-c",
        "import engine, pathlib; p = pathlib.Path(engine.__file__).parent; "
        "print(p); print((p / 'py.typed').exists()); print(engine.__version__)",
        cwd=installed,
    ).split()
    assert Path(found[0]).is_relative_to(installed.parent)
    assert found[1] == "True"
    assert run(installed / "engine", "--version", cwd=installed).strip() == f"mcp-engine {found[2]}"


async def test_the_installed_package_serves_a_two_round_call(
    installed: Path, tmp_path: Path
) -> None:
    app = tmp_path / "shop.py"
    app.write_text(textwrap.dedent(APP))
    port = free_port()
    log = tmp_path / "serve.log"
    process = serve(installed, app, port, log)
    capabilities = {"elicitation": {}}
    with healthy_until_stopped(process, port, log):
        async with httpx2.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=20
        ) as http:
            body = call("order_book", {"title": "Dune"}, capabilities=capabilities)
            first = assert_result(await post(http, body))
            params = {
                "name": "order_book",
                "arguments": {"title": "Dune"},
                "inputResponses": {
                    key: {"action": "accept", "content": {"confirm": True}}
                    for key in first["inputRequests"]
                },
                "requestState": first["requestState"],
            }
            second = assert_result(
                await post(http, request("tools/call", params, capabilities=capabilities))
            )
    assert first["resultType"] == "input_required"
    assert second["content"][0]["text"] == "Ordered Dune."
    assert (tmp_path / "data" / "mcp-engine" / "calls.sqlite3").exists()


async def test_the_installed_package_shows_its_journal_in_the_browser_page(
    installed: Path, tmp_path: Path
) -> None:
    """``engine journal-ui`` of the wheel: the page's own script and stylesheet are in it."""
    app = tmp_path / "shop.py"
    app.write_text(textwrap.dedent(APP))
    port = free_port()
    log = tmp_path / "serve.log"
    with healthy_until_stopped(serve(installed, app, port, log), port, log):
        async with httpx2.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=20
        ) as http:
            body = call("order_book", {"title": "Dune"}, capabilities={"elicitation": {}})
            asked = assert_result(await post(http, body))
    page_port = free_port()
    page_log = tmp_path / "journal-ui.log"
    page = journal_ui(installed, tmp_path, page_port, page_log)
    try:
        async with httpx2.AsyncClient(
            base_url=f"http://127.0.0.1:{page_port}", trust_env=False, timeout=20
        ) as http:
            script = None
            while script is None:
                try:
                    script = await http.get("/static/journal.js")
                except httpx2.TransportError:
                    assert page.poll() is None, page_log.read_text()
                    await anyio.sleep(0.1)
            assert script.status_code == 200 and "pollCalls" in script.text
            assert (await http.get("/static/journal.css")).status_code == 200
            listed = await http.get("/")
            assert listed.status_code == 200 and "order_book" in listed.text
            assert asked["resultType"] == "input_required"
    finally:
        page.terminate()
        page.wait(10)
