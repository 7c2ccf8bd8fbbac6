"""The code fingerprint journaled with every round: it follows the source's syntax, so an edit
to logic changes it, while layout, comments and the Python version do not."""

from __future__ import annotations

import importlib.util
import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.handlers.code_fingerprint import bytecode_digest, code_digest
from engine.testing import load_fixture, replay_call
from examples.bookshop_server import build
from tests.conftest import KEY

GOOD = Path(__file__).resolve().parents[1] / "fixtures" / "order_book_neuromancer.json"


def stock_left(title: str, sold: int = 0) -> int:
    """How many copies are left."""
    left = {"Dune": 7}.get(title, 0) - sold
    return max(left, 0)


def load(tmp_path: Path, name: str, source: str) -> Callable[..., Any]:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn: Callable[..., Any] = module.check
    return fn


def test_the_fingerprint_is_the_same_on_every_python() -> None:
    # the same value on 3.11, 3.12 and 3.13; bytecode_digest differs between them
    assert code_digest([stock_left]) == "8dcd4cb1f22f569d"


def test_layout_and_comments_leave_it_alone_and_logic_changes_it(tmp_path: Path) -> None:
    plain = load(
        tmp_path,
        "plain",
        """
        async def check(title: str) -> int:
            return len(title)
        """,
    )
    reformatted = load(
        tmp_path,
        "reformatted",
        """
        # a comment above
        async def check(
            title: str,
        ) -> int:  # how many
            # counted in characters
            return len( title )
        """,
    )
    edited = load(
        tmp_path,
        "edited",
        """
        async def check(title: str) -> int:
            return len(title) + 1
        """,
    )
    assert code_digest([plain]) == code_digest([reformatted])
    assert code_digest([plain]) != code_digest([edited])
    assert code_digest([plain, edited]) != code_digest([edited, plain])  # a handler's order counts


def test_a_file_written_again_and_imported_again_is_read_again(tmp_path: Path) -> None:
    first = code_digest([load(tmp_path, "app", "def check(title):\n    return len(title)\n")])
    again = load(tmp_path, "app", "def check(title):\n    return len(title) + 1  # edited\n")
    assert code_digest([again]) != first
    assert code_digest([again]) != bytecode_digest([again])  # from the new tree


def test_a_function_without_source_falls_back_to_its_bytecode() -> None:
    made: dict[str, Any] = {}
    exec(compile("def check(title):\n    return len(title)\n", "<generated>", "exec"), made)
    assert code_digest([made["check"]]) == bytecode_digest([made["check"]])
    exec(compile("def check(title):\n    return len(title) + 1\n", "<generated>", "exec"), made)
    assert code_digest([made["check"]]) != bytecode_digest([stock_left])


def test_a_lambda_is_fingerprinted_by_its_syntax_unless_its_line_has_another() -> None:
    spanning = lambda title: (  # noqa: E731
        len(title),
        title,
    )
    assert code_digest([spanning]) != bytecode_digest([spanning])  # read from its source
    first, second = [lambda title: len(title), lambda title: (len(title),)]
    assert code_digest([first]) == bytecode_digest([first])  # two on a line: which is which?
    assert code_digest([first]) != code_digest([second])


@pytest.mark.anyio
async def test_a_call_journaled_with_the_bytecode_fingerprint_replays_as_unchanged(
    tmp_path: Path,
) -> None:
    app = build(keys=[KEY])
    handler = app.tools["order_book"]
    before = bytecode_digest(handler.functions(handler.signature))
    recorded = GOOD.read_text().replace(handler.code_fingerprint, before)
    assert before in recorded and before != handler.code_fingerprint
    older = tmp_path / "older.json"
    older.write_text(recorded)

    report = await replay_call(app, load_fixture(older))
    assert report.ok and not report.code_changed

    other = json.loads(recorded.replace(before, "0123456789abcdef"))
    older.write_text(json.dumps(other))
    assert (await replay_call(app, load_fixture(older))).code_changed
