"""The import-graph checker on small synthetic trees, so a clean run on the real tree means it
looked and found nothing, not that it could not see."""

from __future__ import annotations

from pathlib import Path

from tests.import_graph import (
    FLOORS,
    HINT,
    PACKAGES,
    Floor,
    analyse,
    check,
    docs_problems,
    drawing,
    write_docs,
)

REPO = Path(__file__).resolve().parent.parent


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def one_floor(root: Path) -> tuple[Floor, ...]:
    """Every package of the tree on one floor: for the tests of cycles and private imports."""
    return (Floor("all", tuple(f"{p}/" for p in PACKAGES if (root / p).is_dir())),)


def problems(root: Path) -> list[str]:
    return check(root, one_floor(root))


def only(found: list[str], fragment: str) -> str:
    matching = [p for p in found if fragment in p]
    assert len(matching) == 1, found
    return matching[0]


def test_clean_tree_has_no_problems(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "engine/__init__.py": "",
            "engine/a.py": "import engine.b\nfrom engine.b import thing\n",
            "engine/b.py": "import os\nfrom os import _exit\n",
            "stores/__init__.py": "from ._urls import parse\n",
            "stores/_urls.py": "",
        },
    )
    assert problems(root) == []


def test_module_level_cycle(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "engine/__init__.py": "",
            "engine/a.py": '"""A."""\n\nfrom engine.b import x\n',
            "engine/b.py": "import engine.a\n",
        },
    )
    problem = only(problems(root), "import cycle")
    assert "engine.a -> engine.b -> engine.a" in problem
    assert "engine.a -> engine.b: engine/a.py:3 (module-level)" in problem
    assert "engine.b -> engine.a: engine/b.py:1 (module-level)" in problem


def test_type_checking_cycle(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "engine/__init__.py": "",
            "engine/a.py": "from engine.b import x\n",
            "engine/b.py": (
                "import typing\n"
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from engine.a import A\n"
                "if typing.TYPE_CHECKING:\n"
                "    pass\n"
                "else:\n"
                "    import engine.a\n"
            ),
        },
    )
    problem = only(problems(root), "import cycle")
    assert "engine/b.py:4 (TYPE_CHECKING); engine/b.py:8 (module-level)" in problem


def test_function_level_cycle(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "engine/__init__.py": "",
            "engine/a.py": "from engine.b import x\n",
            "engine/b.py": (
                "class B:\n"
                "    async def run(self) -> None:\n"
                "        if TYPE_CHECKING:\n"
                "            from engine.a import A\n"
            ),
        },
    )
    problem = only(problems(root), "import cycle")
    assert "engine.b -> engine.a: engine/b.py:4 (function-level)" in problem


def test_self_import_is_a_cycle(tmp_path: Path) -> None:
    root = tree(tmp_path, {"engine/__init__.py": "", "engine/a.py": "from engine.a import x\n"})
    problem = only(problems(root), "import cycle")
    assert "engine.a imports itself" in problem
    assert "engine.a -> engine.a: engine/a.py:1 (module-level)" in problem


def test_relative_imports_resolve(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "engine/__init__.py": "",
            "engine/top.py": "from .pkg import mod\n",
            "engine/pkg/__init__.py": "from . import mod\n",
            "engine/pkg/mod.py": "from .sub.leaf import y\n",
            "engine/pkg/sub/__init__.py": "",
            "engine/pkg/sub/leaf.py": "from ...top import z\n",
        },
    )
    found = problems(root)
    problem = only(found, "import cycle")
    assert "engine.pkg.mod -> engine.pkg.sub.leaf -> engine.top -> engine.pkg.mod" in problem
    # `from . import mod` in the package goes to the submodule, not to the package itself.
    assert "engine.pkg imports itself" not in "\n".join(found)


def test_from_import_of_a_name_goes_to_the_module(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "engine/__init__.py": "",
            "engine/pkg/__init__.py": "from engine.user import thing\n",
            "engine/pkg/mod.py": "",
            "engine/user.py": "from engine.pkg import mod\n",
        },
    )
    # engine.user imports the submodule engine.pkg.mod, not the package: no cycle.
    assert problems(root) == []
    (root / "engine/user.py").write_text("from engine.pkg import helper\n")
    problem = only(problems(root), "import cycle")
    assert "engine.pkg -> engine.user -> engine.pkg" in problem


def test_private_name_import(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "engine/__init__.py": "",
            "engine/claims.py": "def _sorted() -> None: ...\n",
            "engine/ledger.py": (
                "from engine.claims import __all__, _sorted\n"
                "def f() -> None:\n"
                "    from .claims import _sorted as s\n"
            ),
        },
    )
    assert problems(root) == [
        "engine/ledger.py:1: from engine.claims import _sorted (private to engine.claims)",
        "engine/ledger.py:3: from engine.claims import _sorted (private to engine.claims)",
    ]


def test_internal_may_import_private_names(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "engine/__init__.py": "",
            "engine/claims.py": "",
            "engine/ledger.py": "from engine._internal.order import sort_claims\n",
            "engine/_internal/__init__.py": "",
            "engine/_internal/order.py": "from engine.claims import _sorted\n",
            "engine/_internal/deep/more.py": "from ...claims import _key\n",
            "stores/__init__.py": "",
            "stores/base.py": "",
            "stores/_urls.py": "from .base import _parse\n",
        },
    )
    assert problems(root) == [
        "stores/_urls.py:1: from stores.base import _parse (private to stores.base)"
    ]


def test_stores_private_modules(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "engine/__init__.py": "",
            "engine/server.py": (
                "from stores import _redis_mux\n"
                "import stores._urls\n"
                "from stores.base import Store\n"
            ),
            "stores/__init__.py": "from ._open import open_store\n",
            "stores/_open.py": "from stores._urls import parse\nfrom ._checks import check_ttl\n",
            "stores/_urls.py": "",
            "stores/_checks.py": "",
            "stores/_redis_mux.py": "",
            "stores/base.py": "",
            "stores/redis.py": "from . import _redis_mux as mux\n",
        },
    )
    assert problems(root) == [
        "engine/server.py:1: from stores import _redis_mux (private module of stores)",
        "engine/server.py:2: import stores._urls (private module of stores)",
    ]


TWO_FLOORS = (
    Floor("top", ("engine/__init__.py", "engine/app.py", "engine/cli/")),
    Floor("bottom", ("engine/context.py", "engine/errors.py", "engine/questions/")),
    Floor("stores", ("stores/",)),
)


def floors_tree(root: Path, changed: dict[str, str] | None = None) -> Path:
    """A tree on TWO_FLOORS whose imports all point down or across, with ``changed`` files."""
    files = {
        "engine/__init__.py": "from engine.app import MCPServer\n",
        "engine/app.py": "from engine.context import Context\n",
        "engine/cli/__init__.py": "",
        "engine/cli/main.py": "import engine\nfrom engine.questions.kinds import Elicit\n",
        "engine/context.py": "from engine.questions.kinds import Elicit\nimport stores.base\n",
        "engine/errors.py": "",
        "engine/questions/__init__.py": "",
        "engine/questions/kinds.py": "from ..errors import MCPError\n",
        "stores/__init__.py": "",
        "stores/base.py": "from stores import packing\n",
        "stores/packing.py": "",
    }
    return tree(root, files | (changed or {}))


def test_imports_down_and_across_floors_pass(tmp_path: Path) -> None:
    assert check(floors_tree(tmp_path), TWO_FLOORS) == []


def test_upward_import_fails_wherever_it_is(tmp_path: Path) -> None:
    root = floors_tree(
        tmp_path,
        {
            "engine/context.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from engine.app import MCPServer, Other\n"
                "def f() -> None:\n"
                "    from engine.cli import main\n"
                "import engine\n"
            )
        },
    )
    found = check(root, TWO_FLOORS)
    assert [p for p in found if p.startswith("upward import")] == [
        "upward import: engine/context.py:3 (TYPE_CHECKING): engine.context (floor 2, bottom) "
        "imports engine.app (floor 1, top)",
        "upward import: engine/context.py:5 (function-level): engine.context (floor 2, bottom) "
        "imports engine.cli.main (floor 1, top)",
        "upward import: engine/context.py:6 (module-level): engine.context (floor 2, bottom) "
        "imports engine (floor 1, top)",
    ]


def test_upward_import_is_counted_with_the_hint(tmp_path: Path) -> None:
    root = floors_tree(tmp_path, {"engine/errors.py": "from engine.questions import kinds\n"})
    findings = analyse(root, TWO_FLOORS)
    assert findings.upward == []  # across one floor, not up
    root = floors_tree(tmp_path, {"engine/errors.py": "from engine.app import MCPServer\n"})
    findings = analyse(root, TWO_FLOORS)
    assert len(findings.upward) == 1
    assert findings.summary().endswith(HINT)
    assert "1 upward import(s)" in findings.summary()


def test_stores_may_not_import_the_engine(tmp_path: Path) -> None:
    root = floors_tree(tmp_path, {"stores/packing.py": "from engine.errors import MCPError\n"})
    assert check(root, TWO_FLOORS) == [
        "upward import: stores/packing.py:1 (module-level): stores.packing (floor 3, stores) "
        "imports engine.errors (floor 2, bottom)"
    ]


def test_a_module_on_no_floor_fails(tmp_path: Path) -> None:
    root = floors_tree(tmp_path, {"engine/new.py": ""})
    problem = only(check(root, TWO_FLOORS), "no floor")
    assert problem.startswith("engine/new.py: engine.new is on no floor: add it, or its folder,")


def test_a_module_on_two_floors_fails(tmp_path: Path) -> None:
    floors = (*TWO_FLOORS, Floor("again", ("engine/questions/kinds.py",)))
    problem = only(check(floors_tree(tmp_path), floors), "more than one floor")
    assert problem == (
        "engine/questions/kinds.py: engine.questions.kinds is on more than one floor: "
        "engine/questions/ (floor 2), engine/questions/kinds.py (floor 4); keep one of them in "
        "FLOORS in tests/import_graph.py"
    )


def test_a_floor_path_naming_no_module_fails(tmp_path: Path) -> None:
    floors = (*TWO_FLOORS, Floor("gone", ("engine/gone.py", "engine/gone/")))
    found = check(floors_tree(tmp_path), floors)
    assert found == [
        "floor 4 (gone) lists engine/gone.py, which names no module: remove it from FLOORS in "
        "tests/import_graph.py",
        "floor 4 (gone) lists engine/gone/, which names no module: remove it from FLOORS in "
        "tests/import_graph.py",
    ]


def test_a_file_is_not_a_folder(tmp_path: Path) -> None:
    # engine/app.py names engine.app only, not every module whose name starts with it.
    root = floors_tree(tmp_path, {"engine/appendix.py": ""})
    problem = only(check(root, TWO_FLOORS), "no floor")
    assert problem.startswith("engine/appendix.py: engine.appendix is on no floor")


def test_docs_drawing_is_checked_and_written(tmp_path: Path) -> None:
    root = floors_tree(tmp_path)
    docs = root / "docs/architecture.md"
    docs.parent.mkdir()
    docs.write_text("# A\n\n## Layering\n\nFloors:\n\n```\n1  top  app.py\n```\n\nAfter.\n")
    assert check(root, TWO_FLOORS) == [
        "docs/architecture.md: the Layering drawing differs from FLOORS in "
        "tests/import_graph.py: `python tests/import_graph.py --write-docs` draws it again"
    ]
    write_docs(root, TWO_FLOORS)
    assert check(root, TWO_FLOORS) == []
    assert docs.read_text() == (
        "# A\n\n## Layering\n\nFloors:\n\n```\n"
        "1  top     __init__.py, app.py, cli/\n"
        "2  bottom  context.py, errors.py, questions/\n"
        "3  stores  stores/\n"
        "```\n\nAfter.\n"
    )
    docs.write_text("# A\n\n## Layering\n\nNo drawing.\n")
    assert check(root, TWO_FLOORS) == [
        "docs/architecture.md: no drawing of the floors: a fenced block after '## Layering'"
    ]


def test_a_long_floor_wraps_under_its_paths() -> None:
    floor = Floor("leaves", tuple(f"engine/module_number_{n}.py" for n in range(6)))
    lines = drawing((floor,)).splitlines()
    assert len(lines) == 2
    assert all(len(line) <= 99 for line in lines)
    assert lines[1].startswith(" " * len("1  leaves  ") + "module_number_")


def test_the_docs_draw_the_floors_the_check_enforces() -> None:
    assert docs_problems(REPO, FLOORS) == []
    assert drawing(FLOORS) in (REPO / "docs/architecture.md").read_text()
