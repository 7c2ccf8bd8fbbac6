"""Every ```python block in docs/*.md runs, so the docs prove what they say.

Convention for doc authors:

- Each ```python block is a complete program: its own imports, its own server, its own asserts.
  Nothing is shared between blocks.
- An async example defines ``async def main()`` and ends with ``anyio.run(main)`` at top level,
  unguarded (blocks run with ``__name__ == "docs_example"``, so an ``if __name__ == "__main__"``
  guard would skip it).
- Keep resolvers, models and tools at the top level of the block: the block's namespace is the
  module globals the engine resolves annotations against.
- A block whose info string is ``python no-run`` is shown but deliberately not executed; use it
  only when a block cannot run here (none do today).

Each block is compiled with the markdown file as its filename and its real line numbers, so a
failure points at the line in the doc. The test restores what a block may touch globally
(``ENGINE_KEYS``, the ``engine`` loggers) and registers nothing in ``sys.modules``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[^`]*)$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # line number of the first code line
    info: str
    code: str

    @property
    def id(self) -> str:
        return f"{self.path.name}:{self.line}"

    @property
    def runs(self) -> bool:
        return "no-run" not in self.info.split()[1:]


def blocks(path: Path) -> Iterator[Block]:
    """The fenced blocks of one markdown file whose info string starts with ``python``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    opened: tuple[int, str] | None = None
    body: list[str] = []
    for number, line in enumerate(lines, 1):
        fence = FENCE.match(line)
        if opened is None:
            if fence is not None:
                opened, body = (number + 1, fence["info"].strip()), []
            continue
        if fence is not None and not fence["info"].strip():
            start, info = opened
            opened = None
            if info.split()[:1] == ["python"]:
                yield Block(path, start, info, "\n".join(body) + "\n")
            continue
        body.append(line)
    assert opened is None, f"{path.name}: unclosed code fence opened at line {opened[0] - 1}"


PAGES = sorted(DOCS.glob("*.md"))
BLOCKS = [block for page in PAGES for block in blocks(page)]

ENVIRONMENT = ("ENGINE_KEYS", "ENGINE_STORE", "ENGINE_REPLICA_ID")


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No engine environment variables, and engine loggers restored after the block."""
    for name in ENVIRONMENT:
        monkeypatch.setenv(name, "")  # recorded, so teardown restores the original value
        monkeypatch.delenv(name)
    saved = {name: _logger_state(name) for name in _engine_loggers()}
    try:
        yield
    finally:
        for name in _engine_loggers():
            logger = logging.getLogger(name)
            level, handlers, propagate = saved.get(name, (logging.NOTSET, [], True))
            logger.setLevel(level)
            logger.handlers[:] = handlers
            logger.propagate = propagate


def _engine_loggers() -> list[str]:
    names = logging.root.manager.loggerDict
    return [name for name in names if name == "engine" or name.startswith("engine.")]


def _logger_state(name: str) -> tuple[int, list[logging.Handler], bool]:
    logger = logging.getLogger(name)
    return logger.level, list(logger.handlers), logger.propagate


def test_every_page_has_runnable_examples() -> None:
    names = {page.name for page in PAGES}
    assert {"dependencies.md", "context.md", "state.md"} <= names
    for name in ("dependencies.md", "context.md", "state.md"):
        assert any(b.path.name == name and b.runs for b in BLOCKS), f"{name} has no example"


def prose(path: Path) -> list[str]:
    """The lines of a page outside code fences."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower-cased, punctuation dropped, spaces to hyphens."""
    found: set[str] = set()
    for line in prose(path):
        heading = re.match(r"#{1,6} (.+)", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading[1].strip().lower()).replace(" ", "-")
            n, unique = 0, slug
            while unique in found:
                n += 1
                unique = f"{slug}-{n}"
            found.add(unique)
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_between_pages_resolve(page: Path) -> None:
    for line in prose(page):
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"[a-z]+:", target):
                continue  # an external URL
            file, _, anchor = target.partition("#")
            linked = (page.parent / file).resolve() if file else page
            assert linked.exists(), f"{page.name}: link to missing {target}"
            if anchor and linked.suffix == ".md":
                assert anchor in anchors(linked), f"{page.name}: no heading for {target}"


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.runs], ids=lambda b: b.id)
@pytest.mark.usefixtures("isolated")
def test_doc_block_runs(block: Block) -> None:
    source = "\n" * (block.line - 1) + block.code
    code = compile(source, str(block.path.relative_to(DOCS.parent)), "exec")
    namespace: dict[str, object] = {"__name__": "docs_example"}
    exec(code, namespace)
