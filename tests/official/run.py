"""``make official``: the official SDK's own server tests and tutorials, run against this server.

Fetches the pinned ``mcp`` source distribution from PyPI (its hash checked, cached beside the
interop clients), extracts the server tests (``tests/server/mcpserver/``), the tutorial tests
(``tests/docs_src/``) with the tutorials they import (``docs_src/``), rewrites their imports
(``rewrite.py``: ``mcp.server.mcpserver`` becomes ``engine``), and runs them with pytest; the
official ``Client`` connects to our server in memory as it connects to its own. Five example
servers of ``examples/stories/`` run too, each driven by its own client. Tests of official
internals, and of what this server does differently on purpose, are left out by
``excluded.txt``, each group with its reason (``conftest_run.py`` applies it). Tutorial tests
whose rewritten code never reaches ``engine`` test only the official SDK and are not run.

Prints one summary line per group and exits non-zero when any test outside the exclusions fails.
The project holds this harness only; the official files live in the cache.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from tests.interop.clients import cache_root, locked  # noqa: E402
from tests.official.rewrite import rewrite_tree  # noqa: E402

VERSION = "2.3.0"
SDIST = f"mcp-{VERSION}.tar.gz"
SDIST_URL = (
    "https://files.pythonhosted.org/packages/9d/8d/"
    "e0d339616f4810e9051d4aba6887afab289ab1f81875fe908b606cdfd0e3/" + SDIST
)
SDIST_SHA256 = "8b147a50441cf059dc88c684e0aeed3687f0aa0f39c6cde7b90330effd2b34d8"
TAKEN = (
    "tests/__init__.py",
    "tests/server/__init__.py",
    "tests/server/mcpserver/",
    "tests/docs_src/",
    "tests/examples/",
    "tests/interaction/",
    "docs_src/",
    "examples/",
)
STORIES = ("tools", "prompts", "resources", "lifespan", "streaming")
"""Example servers of the official sdist (examples/stories/<name>/server.py), each run by its own
official client (client.py) in memory and over HTTP, in both protocol eras."""
FOUNDING = frozenset(
    {"test_dependencies.py", "test_context.py", "test_elicitation.py", "test_sampling_and_roots.py"}
)


def sdist() -> Path:
    """The pinned source distribution, downloaded once and checked every time."""
    folder = cache_root() / "official"
    path = folder / SDIST
    with locked(folder / ".lock"):
        if not path.exists():
            partial = path.with_suffix(".part")
            with urllib.request.urlopen(SDIST_URL, timeout=120) as response:
                partial.write_bytes(response.read())
            partial.rename(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        path.unlink()
        raise SystemExit(f"{SDIST}: sha256 {digest}, expected {SDIST_SHA256}; removed, run again")
    return path


def extract(archive: Path, into: Path) -> None:
    prefix = f"mcp-{VERSION}/"
    with tarfile.open(archive) as tar:
        members = []
        for member in tar.getmembers():
            name = member.name.removeprefix(prefix)
            if any(name == t or (t.endswith("/") and name.startswith(t)) for t in TAKEN):
                member.name = name
                members.append(member)
        tar.extractall(into, members=members, filter="data")


def reaches_engine(path: Path, root: Path, seen: set[Path] | None = None) -> bool:
    """Whether a rewritten file imports ``engine``, itself or through the tutorials it imports."""
    seen = set() if seen is None else seen
    if path in seen:
        return False
    seen.add(path)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        for module in modules:
            if module == "engine" or module.startswith("engine."):
                return True
            if module.startswith("docs_src."):
                local = root / Path(*module.split("."))
                for candidate in (local.with_suffix(".py"), local / "__init__.py"):
                    if candidate.exists() and reaches_engine(candidate, root, seen):
                        return True
    return False


def excluded_patterns() -> dict[str, str]:
    """The lines of excluded.txt (test ids, files, or ``prefix*``), each with its section (the
    ``# == name: ...`` line above it)."""
    patterns: dict[str, str] = {}
    section = "excluded"
    for line in (HERE / "excluded.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("# == "):
            section = line.removeprefix("# == ").split(":", 1)[0]
        pattern = line.split("#", 1)[0].strip()
        if pattern:
            patterns[pattern] = section
    return patterns


def group_of(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    if path.startswith("tests/examples/"):
        return "example servers"
    if path.startswith("tests/docs_src/"):
        return "founding pages" if Path(path).name in FOUNDING else "other tutorials"
    return "server tests"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (select tests, -x, ...)")
    parser.add_argument("--results", type=Path, help="write each test's outcome here (JSON)")
    parser.add_argument("--keep", action="store_true", help="keep the rewritten tree, print it")
    args = parser.parse_args()

    archive = sdist()
    work = Path(tempfile.mkdtemp(prefix="engine-official-"))
    try:
        extract(archive, work)
        rewrite_tree(work)
        shutil.copy(HERE / "conftest_run.py", work / "conftest.py")
        shutil.copy(HERE / "official_internal.py", work / "official_internal.py")
        (work / "pytest.ini").write_text(
            # hypothesis's plugin imports under assertion rewriting, which trips a CPython 3.11
            # AST bug after certain failures; the official tests do not use hypothesis.
            "[pytest]\naddopts = -p anyio -p no:cacheprovider -p no:hypothesispytest\n"
            "anyio_mode = auto\n"
            "filterwarnings =\n    ignore::DeprecationWarning\n",
            encoding="utf-8",
        )
        candidates = [
            *(work / "tests" / "server" / "mcpserver").rglob("test_*.py"),
            *(work / "tests" / "docs_src").glob("test_*.py"),
        ]
        excluded = excluded_patterns()
        targets = sorted(
            relative
            for p in candidates
            if (relative := p.relative_to(work).as_posix()) not in excluded
            and reaches_engine(p, work)
        )
        targets += [
            f"tests/examples/test_stories.py::test_story[{name}-server-{transport}-{era}]"
            for name in STORIES
            for transport in ("in-memory", "http-asgi")
            for era in ("modern", "legacy")
        ]
        results = work / "results.json"
        env = dict(
            os.environ,
            OFFICIAL_RESULTS=str(results),
            OFFICIAL_EXCLUDED=json.dumps(excluded),
        )
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(work), str(work / "examples"), env.get("PYTHONPATH")])
        )
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rN",
            "--timeout",
            "60",
            "--continue-on-collection-errors",
            "--tb=native",
            *(args.pytest_args or targets),
        ]
        proc = subprocess.run(command, cwd=work, env=env)
        outcomes: dict[str, list[str]] = (
            json.loads(results.read_text(encoding="utf-8")) if results.exists() else {}
        )
        if args.results:
            shutil.copy(results, args.results)
        counts: dict[str, Counter[str]] = {}
        left_out: Counter[str] = Counter()
        for nodeid, (outcome, section) in outcomes.items():
            if outcome == "excluded":
                left_out[section] += 1
            else:
                counts.setdefault(group_of(nodeid), Counter())[outcome] += 1
        for group in ("founding pages", "other tutorials", "server tests", "example servers"):
            c = counts.get(group, Counter())
            total = sum(c.values())
            print(
                f"official {VERSION} {group}: {c['passed']} of {total} passed"
                + "".join(f", {n} {k}" for k, n in sorted(c.items()) if k != "passed")
            )
        files = Counter(section for pattern, section in excluded.items() if pattern.endswith(".py"))
        shown = [
            f"{section} {n}" + (f" and {files[section]} whole files" if files[section] else "")
            for section, n in sorted(left_out.items())
        ]
        print(f"official {VERSION} left out by excluded.txt: {', '.join(shown)}")
        if args.keep:
            print(f"rewritten tree kept in {work}")
        return proc.returncode
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
