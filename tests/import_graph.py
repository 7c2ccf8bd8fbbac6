"""Check the import graph of ``engine`` and ``stores``: floors, no import cycles, no private
imports.

Floors: every module of ``engine`` and ``stores`` sits on exactly one floor of ``FLOORS``, named by
its file or its folder, and imports only from its own floor and the floors below it. A folder sits
on one floor: a module that belongs lower moves to a folder of that floor. docs/architecture.md
shows the same floors (its Layering drawing is checked against ``FLOORS``, and
``--write-docs`` writes it).

Cycles make a module's behaviour depend on which module happened to be imported first, and they
hide layering mistakes (a low layer reaching up into a high one). Every import counts, for floors
and cycles alike: module-level ones, those under ``if TYPE_CHECKING:`` (a cycle there is still a
design cycle, and breaks as soon as someone needs the name at run time) and those inside functions
(a deferred import is the usual way a cycle gets papered over). There is no allow-list: a lower
floor that must call a higher one is given a narrow protocol (or the value) by it.

Choices, so the graph stays precise:

- An edge goes to the exact module named. ``from a.b import c`` goes to ``a.b.c`` when ``a/b/c.py``
  or ``a/b/c/__init__.py`` exists, otherwise to ``a.b``. No implicit edge is added to parent
  packages: importing ``engine.a.b`` also runs ``engine/a/__init__.py``, but package ``__init__``
  modules are expected to stay import-free or be lazy, so counting them would only add noise.
- Only edges between ``engine`` modules are checked for cycles; floors are checked for every
  import between modules of ``engine`` and ``stores``.
- "imports" in the summary counts distinct (importer, imported) pairs between ``engine`` modules.

Private imports: a module may not ``from M import _name`` from another module of ``engine`` or
``stores`` (modules under ``engine/_internal/`` may, from ``engine``). A private *module*
(``stores._urls``, ``engine._internal.x``) may be imported from within its own top-level package
only. Private names of the standard library and third-party packages are their own business
(``os._exit`` is public API) and are not checked.

Usage: ``python tests/import_graph.py [ROOT]``; exits 1 and prints every problem if any.
``python tests/import_graph.py --write-docs [ROOT]`` writes the floors into the Layering drawing
of docs/architecture.md.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import NamedTuple


class Floor(NamedTuple):
    """One floor: its name, and the files (``engine/app.py``) and folders (``engine/cli/``, with
    everything under it) on it."""

    name: str
    paths: tuple[str, ...]


# Top to bottom: a module imports from its own floor and the floors below it, never above.
FLOORS: tuple[Floor, ...] = (
    Floor(
        "entry points",
        (
            "engine/__init__.py",
            "engine/__main__.py",
            "engine/cli/",
            "engine/debug/",
            "engine/prompts.py",
            "engine/testing.py",
            "engine/tools.py",
        ),
    ),
    Floor("the server", ("engine/app.py",)),
    Floor(
        "server parts",
        (
            "engine/direct.py",
            "engine/extensions.py",
            "engine/operations.py",
            "engine/request_state.py",
            "engine/server_core.py",
        ),
    ),
    Floor("transports", ("engine/transports/",)),
    Floor("protocol", ("engine/protocol/",)),
    Floor("runtime", ("engine/completions.py", "engine/registry.py", "engine/runtime.py")),
    Floor("tasks", ("engine/tasks/",)),
    Floor("rounds", ("engine/calls/",)),
    Floor(
        "handlers, services",
        (
            "engine/extension.py",
            "engine/fleet/",
            "engine/handlers/",
            "engine/resources/",
            "engine/store_services/",
        ),
    ),
    Floor("middleware", ("engine/middleware.py",)),
    Floor("dependencies", ("engine/di/",)),
    Floor("context", ("engine/context.py",)),
    Floor("scope", ("engine/scope.py",)),
    Floor("questions", ("engine/questions/",)),
    Floor("settings", ("engine/settings.py",)),
    Floor("state", ("engine/caching.py", "engine/state/")),
    Floor("auth", ("engine/auth/",)),
    Floor(
        "leaves",
        (
            "engine/_internal/",
            "engine/content_blocks.py",
            "engine/errors.py",
            "engine/input_requests.py",
            "engine/media.py",
            "engine/prompt_messages.py",
            "engine/role.py",
            "engine/types.py",
        ),
    ),
    Floor("stores", ("stores/",)),
)

PACKAGES = ("engine", "stores")
GRAPH_PACKAGE = "engine"
INTERNAL = "engine._internal"
DOCS = "docs/architecture.md"
DOCS_SECTION = "## Layering"
DRAWING_WIDTH = 99

MODULE_LEVEL = "module-level"
TYPE_CHECKING_BLOCK = "TYPE_CHECKING"
FUNCTION_LEVEL = "function-level"

HINT = (
    "hint: a module imports from its own floor and the floors below it (FLOORS in "
    "tests/import_graph.py, drawn in docs/architecture.md). Move what a lower module needs down "
    "to its floor, move a module into a folder of the floor its imports say, or pass a narrow "
    "protocol (or the value) down instead of importing upward"
)


class Site:
    """Where one import statement is, and when it runs."""

    def __init__(self, path: str, line: int, kind: str) -> None:
        self.path = path
        self.line = line
        self.kind = kind

    def __str__(self) -> str:
        return f"{self.path}:{self.line} ({self.kind})"


class Findings:
    """What one run found; ``problems`` is what makes the check fail."""

    def __init__(self, modules: int, floors: int) -> None:
        self.modules = modules
        self.floors = floors
        self.graph_modules = 0
        self.edges = 0
        self.parse_errors: list[str] = []
        self.placement: list[str] = []
        self.upward: list[str] = []
        self.cycles: list[str] = []
        self.private: list[str] = []
        self.docs: list[str] = []

    @property
    def problems(self) -> list[str]:
        return (
            self.parse_errors
            + self.placement
            + self.upward
            + self.cycles
            + self.private
            + self.docs
        )

    def summary(self) -> str:
        head = (
            f"import graph: {self.modules} modules on {self.floors} floors, "
            f"{self.graph_modules} {GRAPH_PACKAGE} modules with {self.edges} imports between them"
        )
        if not self.problems:
            return f"{head}; no upward import, no cycle, no private import"
        counts = [
            f"{len(self.upward)} upward import(s)",
            f"{len(self.cycles)} cycle(s)",
            f"{len(self.private)} private import(s)",
        ]
        if self.placement:
            counts.append(f"{len(self.placement)} floor table problem(s)")
        if self.docs:
            counts.append("the drawing in docs differs from the floors")
        if self.parse_errors:
            counts.append(f"{len(self.parse_errors)} unparsable file(s)")
        return f"{head}: {', '.join(counts)}\n{HINT}"


class _Import:
    """One import of one module: ``module`` is what gets imported, resolved to an absolute name;
    for ``from base import name``, ``base`` and ``name`` are what the statement says (resolved)."""

    def __init__(self, module: str, base: str | None, name: str | None, site: Site) -> None:
        self.module = module
        self.base = base
        self.name = name
        self.site = site


def is_private(name: str) -> bool:
    """``_x`` and ``__x`` are private; ``__x__`` is not."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_module(module: str) -> bool:
    return any(is_private(part) for part in module.split("."))


def top(module: str) -> str:
    return module.split(".", 1)[0]


def discover(root: Path) -> dict[str, tuple[Path, bool]]:
    """Map each module name under the checked packages to its file and whether it is a package."""
    modules: dict[str, tuple[Path, bool]] = {}
    for package in PACKAGES:
        base = root / package
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if any(part == "__pycache__" or part.startswith(".") for part in parts):
                continue
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            modules[".".join(parts)] = (path, is_package)
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


class _Collector(ast.NodeVisitor):
    """Collect every import of one module, resolved to absolute module names."""

    def __init__(self, module: str, is_package: bool, path: str, known: set[str]) -> None:
        self.package = module if is_package else module.rpartition(".")[0]
        self.path = path
        self.known = known
        self.kind = MODULE_LEVEL
        self.imports: list[_Import] = []

    def _site(self, node: ast.stmt) -> Site:
        return Site(self.path, node.lineno, self.kind)

    def _in(self, kind: str, nodes: list[ast.stmt]) -> None:
        outer = self.kind
        if outer != FUNCTION_LEVEL:
            self.kind = kind
        for node in nodes:
            self.visit(node)
        self.kind = outer

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._in(FUNCTION_LEVEL, node.body)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._in(FUNCTION_LEVEL, node.body)

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            self._in(TYPE_CHECKING_BLOCK, node.body)
            for stmt in node.orelse:
                self.visit(stmt)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.imports.append(_Import(alias.name, None, None, self._site(node)))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            parts = self.package.split(".") if self.package else []
            if node.level > len(parts):
                return  # beyond the top-level package: Python refuses it too
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join([*parts, base] if base else parts)
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            module = submodule if alias.name != "*" and submodule in self.known else base
            self.imports.append(_Import(module, base, alias.name, self._site(node)))


def _private_problem(importer: str, imp: _Import) -> str | None:
    target = imp.module
    if top(target) not in PACKAGES:
        return None
    where = f"{imp.site.path}:{imp.site.line}"
    statement = f"from {imp.base} import {imp.name}" if imp.name else f"import {target}"
    names_a_value = imp.name is not None and target == imp.base
    if names_a_value and imp.name is not None and is_private(imp.name) and target != importer:
        internal = importer == INTERNAL or importer.startswith(INTERNAL + ".")
        if not (internal and top(target) == GRAPH_PACKAGE):
            return f"{where}: {statement} (private to {target})"
    if private_module(target) and top(target) != top(importer):
        return f"{where}: {statement} (private module of {top(target)})"
    return None


def _resolve(module: str, known: set[str]) -> str | None:
    """The longest known module ``module`` names, or None if it names none."""
    while module:
        if module in known:
            return module
        module = module.rpartition(".")[0]
    return None


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; each component's members sorted, components sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, pending = work[-1]
            if pending:
                succ = pending.pop(0)
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, sorted(graph[succ])))
                elif succ in on_stack:
                    low[node] = min(low[node], index[succ])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return sorted(components)


def _shortest_cycle(start: str, graph: dict[str, set[str]], members: set[str]) -> list[str]:
    """Breadth-first from ``start`` back to itself within one component."""
    previous: dict[str, str] = {}
    queue = [start]
    for node in queue:
        for succ in sorted(graph[node] & members):
            if succ == start:
                chain = [start]
                while node != start:
                    chain.append(node)
                    node = previous[node]
                return [start, *reversed(chain[1:]), start]
            if succ not in previous:
                previous[succ] = node
                queue.append(succ)
    raise AssertionError(f"{start} is in a cycle but none leads back to it")


def _describe_cycle(
    members: list[str], graph: dict[str, set[str]], sites: dict[tuple[str, str], list[Site]]
) -> str:
    """Chains through the component until every member appears in one, each edge with its sites."""
    member_set = set(members)
    inside = sum(len(graph[m] & member_set) for m in members)
    if len(members) == 1:
        lines = [f"import cycle: {members[0]} imports itself"]
    else:
        lines = [
            f"import cycle among {len(members)} modules ({inside} imports between them): "
            + ", ".join(members)
        ]
    covered: set[str] = set()
    for start in members:
        if start in covered:
            continue
        chain = _shortest_cycle(start, graph, member_set)
        covered.update(chain)
        lines.append("  " + " -> ".join(chain))
        for importer, imported in ((chain[i], chain[i + 1]) for i in range(len(chain) - 1)):
            where = "; ".join(str(site) for site in sites[(importer, imported)])
            lines.append(f"    {importer} -> {imported}: {where}")
    return "\n".join(lines)


def _pattern_module(path: str) -> tuple[str, bool]:
    """The module a floor's path names, and whether it names a folder (the module and every one
    under it): ``engine/cli/`` -> ``("engine.cli", True)``, ``engine/__init__.py`` -> ``engine``."""
    folder = path.endswith("/")
    parts = path.strip("/").removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts), folder


def _matches(module: str, pattern: tuple[str, bool]) -> bool:
    name, folder = pattern
    return module == name or (folder and module.startswith(name + "."))


def place(
    modules: dict[str, tuple[Path, bool]], root: Path, floors: tuple[Floor, ...]
) -> tuple[dict[str, int], list[str]]:
    """Each module's floor (0 the top one), and what is wrong with the table: a module on no floor
    or on two, a path that names no module."""
    floor_of: dict[str, int] = {}
    problems: list[str] = []
    claimed: dict[str, list[str]] = {}
    for number, floor in enumerate(floors):
        for path in floor.paths:
            pattern = _pattern_module(path)
            matched = [m for m in modules if _matches(m, pattern)]
            if not matched:
                problems.append(
                    f"floor {number + 1} ({floor.name}) lists {path}, which names no module: "
                    "remove it from FLOORS in tests/import_graph.py"
                )
            for module in matched:
                claimed.setdefault(module, []).append(f"{path} (floor {number + 1})")
                floor_of.setdefault(module, number)
    for module, (path, _) in sorted(modules.items()):
        where = claimed.get(module, [])
        shown = path.relative_to(root).as_posix()
        if not where:
            problems.append(
                f"{shown}: {module} is on no floor: add it, or its folder, to the floor it "
                "belongs on in FLOORS in tests/import_graph.py (the floor of what imports it, or "
                f"lower), then `python tests/import_graph.py --write-docs` to update {DOCS}"
            )
        elif len(where) > 1:
            problems.append(
                f"{shown}: {module} is on more than one floor: {', '.join(where)}; "
                "keep one of them in FLOORS in tests/import_graph.py"
            )
    return floor_of, problems


def _shown(path: str) -> str:
    return path.removeprefix(f"{GRAPH_PACKAGE}/")


def drawing(floors: tuple[Floor, ...] = FLOORS) -> str:
    """The floors as docs/architecture.md draws them: numbered from the top, each with its files
    and folders (under ``engine/`` unless they say otherwise)."""
    number_width = len(str(len(floors)))
    name_width = max(len(floor.name) for floor in floors)
    indent = number_width + 2 + name_width + 2
    lines: list[str] = []
    for number, floor in enumerate(floors, start=1):
        line = f"{number:>{number_width}}  {floor.name:<{name_width}}  "
        paths = [_shown(path) for path in floor.paths]
        for k, path in enumerate(paths):
            piece = path + ("," if k < len(paths) - 1 else "")
            if len(line) > indent and len(line) + len(piece) > DRAWING_WIDTH:
                lines.append(line.rstrip())
                line = " " * indent
            line += piece + " "
        lines.append(line.rstrip())
    return "\n".join(lines) + "\n"


def _drawing_span(text: str) -> tuple[int, int] | None:
    """Where the drawing is in the docs: the first fenced block after the Layering heading."""
    section = text.find(f"\n{DOCS_SECTION}\n")
    if section < 0:
        return None
    fence = text.find("\n```\n", section)
    end = text.find("\n```\n", fence + 1) if fence >= 0 else -1
    if fence < 0 or end < 0:
        return None
    return fence + len("\n```\n"), end + 1


def docs_problems(root: Path, floors: tuple[Floor, ...]) -> list[str]:
    """Whether the docs draw the floors the check enforces (nothing to say without the docs)."""
    path = root / DOCS
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    span = _drawing_span(text)
    if span is None:
        return [f"{DOCS}: no drawing of the floors: a fenced block after {DOCS_SECTION!r}"]
    if text[span[0] : span[1]] != drawing(floors):
        return [
            f"{DOCS}: the Layering drawing differs from FLOORS in tests/import_graph.py: "
            "`python tests/import_graph.py --write-docs` draws it again"
        ]
    return []


def write_docs(root: Path, floors: tuple[Floor, ...] = FLOORS) -> None:
    path = root / DOCS
    text = path.read_text(encoding="utf-8")
    span = _drawing_span(text)
    if span is None:
        raise SystemExit(f"{DOCS}: no fenced block after {DOCS_SECTION!r} to draw the floors in")
    path.write_text(text[: span[0]] + drawing(floors) + text[span[1] :], encoding="utf-8")


def analyse(root: Path, floors: tuple[Floor, ...] = FLOORS) -> Findings:
    """Parse the packages under ``root`` and check their imports against the rules above."""
    modules = discover(root)
    known = set(modules)
    findings = Findings(len(modules), len(floors))
    floor_of, findings.placement = place(modules, root, floors)
    graph: dict[str, set[str]] = {m: set() for m in modules if top(m) == GRAPH_PACKAGE}
    sites: dict[tuple[str, str], list[Site]] = {}
    for module, (path, is_package) in sorted(modules.items()):
        shown = path.relative_to(root).as_posix()
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=shown)
        except (SyntaxError, UnicodeDecodeError) as exc:
            findings.parse_errors.append(f"{shown}: cannot parse: {exc}")
            continue
        collector = _Collector(module, is_package, shown, known)
        collector.visit(tree)
        upward: dict[tuple[str, int], str] = {}
        for imp in collector.imports:
            problem = _private_problem(module, imp)
            if problem is not None:
                findings.private.append(problem)
            target = _resolve(imp.module, known)
            if target is None:
                continue
            here, there = floor_of.get(module), floor_of.get(target)
            if here is not None and there is not None and there < here:
                upward.setdefault(
                    (target, imp.site.line),
                    f"upward import: {imp.site}: {module} (floor {here + 1}, "
                    f"{floors[here].name}) imports {target} (floor {there + 1}, "
                    f"{floors[there].name})",
                )
            if module in graph and target in graph:
                graph[module].add(target)
                edge_sites = sites.setdefault((module, target), [])
                if not edge_sites or edge_sites[-1].line != imp.site.line:
                    edge_sites.append(imp.site)
        findings.upward.extend(upward.values())
    findings.graph_modules = len(graph)
    findings.edges = len(sites)
    for component in strongly_connected(graph):
        node = component[0]
        if len(component) > 1 or node in graph[node]:
            findings.cycles.append(_describe_cycle(component, graph, sites))
    findings.docs = docs_problems(root, floors)
    return findings


def check(root: Path, floors: tuple[Floor, ...] = FLOORS) -> list[str]:
    """Every problem found under ``root``; empty when the import graph is clean."""
    return analyse(root, floors).problems


def main(argv: list[str]) -> int:
    args = argv[1:]
    writing = "--write-docs" in args
    args = [arg for arg in args if arg != "--write-docs"]
    root = Path(args[0]) if args else Path(__file__).resolve().parent.parent
    if writing:
        write_docs(root)
    findings = analyse(root)
    for problem in findings.problems:
        print(problem)
    print(findings.summary())
    return 1 if findings.problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
