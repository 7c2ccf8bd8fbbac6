"""The import-graph checker on small synthetic trees, so a clean run on the real tree means it
looked and found nothing, not that it could not see."""

from __future__ import annotations

from pathlib import Path

from tests.import_graph import check


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def only(problems: list[str], fragment: str) -> str:
    matching = [p for p in problems if fragment in p]
    assert len(matching) == 1, problems
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
    assert check(root, {}) == []


def test_module_level_cycle(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "engine/__init__.py": "",
            "engine/a.py": '"""A."""\n\nfrom engine.b import x\n',
            "engine/b.py": "import engine.a\n",
        },
    )
    problem = only(check(root, {}), "import cycle")
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
    problem = only(check(root, {}), "import cycle")
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
    problem = only(check(root, {}), "import cycle")
    assert "engine.b -> engine.a: engine/b.py:4 (function-level)" in problem


def test_self_import_is_a_cycle(tmp_path: Path) -> None:
    root = tree(tmp_path, {"engine/__init__.py": "", "engine/a.py": "from engine.a import x\n"})
    problem = only(check(root, {}), "import cycle")
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
    problems = check(root, {})
    problem = only(problems, "import cycle")
    assert "engine.pkg.mod -> engine.pkg.sub.leaf -> engine.top -> engine.pkg.mod" in problem
    # `from . import mod` in the package goes to the submodule, not to the package itself.
    assert "engine.pkg imports itself" not in "\n".join(problems)


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
    assert check(root, {}) == []
    (root / "engine/user.py").write_text("from engine.pkg import helper\n")
    problem = only(check(root, {}), "import cycle")
    assert "engine.pkg -> engine.user -> engine.pkg" in problem


def test_allowed_edge_breaks_the_cycle(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "engine/__init__.py": "",
            "engine/a.py": "from engine.b import x\n",
            "engine/b.py": "def f() -> None:\n    from engine.a import y\n",
        },
    )
    assert check(root, {("engine.b", "engine.a"): "b needs a's registry at call time"}) == []
    assert check(root, {("engine.b", "engine.a"): " "}) == [
        "allow-list entry without a reason: ALLOWED[('engine.b', 'engine.a')]"
    ]


def test_stale_allow_list_entry(tmp_path: Path) -> None:
    root = tree(tmp_path, {"engine/__init__.py": "", "engine/a.py": "", "engine/b.py": ""})
    problems = check(root, {("engine.b", "engine.a"): "b needs a"})
    assert problems == [
        "stale allow-list entry: ALLOWED[('engine.b', 'engine.a')]: "
        "engine.b no longer imports engine.a"
    ]


def test_allow_list_entry_closing_no_cycle(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {"engine/__init__.py": "", "engine/a.py": "", "engine/b.py": "import engine.a\n"},
    )
    problem = only(check(root, {("engine.b", "engine.a"): "b needs a"}), "allow-list")
    assert problem.startswith("unneeded allow-list entry: ALLOWED[('engine.b', 'engine.a')]")


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
    assert check(root, {}) == [
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
    assert check(root, {}) == [
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
    assert check(root, {}) == [
        "engine/server.py:1: from stores import _redis_mux (private module of stores)",
        "engine/server.py:2: import stores._urls (private module of stores)",
    ]
