"""Check the import graph of ``engine`` and ``stores``: no import cycles, no private imports.

Cycles make a module's behaviour depend on which module happened to be imported first, and they
hide layering mistakes (a low layer reaching up into a high one). Every import counts: module-level
ones, those under ``if TYPE_CHECKING:`` (a cycle there is still a design cycle, and breaks as soon
as someone needs the name at run time) and those inside functions (a deferred import is the usual
way a cycle gets papered over).

Choices, so the graph stays precise:

- An edge goes to the exact module named. ``from a.b import c`` goes to ``a.b.c`` when ``a/b/c.py``
  or ``a/b/c/__init__.py`` exists, otherwise to ``a.b``. No implicit edge is added to parent
  packages: importing ``engine.a.b`` also runs ``engine/a/__init__.py``, but package ``__init__``
  modules are expected to stay import-free or be lazy, so counting them would only add noise.
- Only edges between ``engine`` modules are checked for cycles; ``stores`` is checked for private
  imports only.
- "imports" in the summary counts distinct (importer, imported) pairs between ``engine`` modules.

Private imports: a module may not ``from M import _name`` from another module of ``engine`` or
``stores`` (modules under ``engine/_internal/`` may, from ``engine``). A private *module*
(``stores._urls``, ``engine._internal.x``) may be imported from within its own top-level package
only. Private names of the standard library and third-party packages are their own business
(``os._exit`` is public API) and are not checked.

Usage: ``python tests/import_graph.py [ROOT]``; exits 1 and prints every problem if any.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

# Import edges that are allowed to close a cycle, removed from the graph before cycles are looked
# for. Add one only when the cycle can't reasonably be broken, keyed (importer, imported) with a
# one-line reason, e.g.:
#     ("engine.a", "engine.b"): "why this import can't go, in one line",
# An entry whose import is gone, or which no longer closes any cycle, fails the check.
ALLOWED: dict[tuple[str, str], str] = {}

PACKAGES = ("engine", "stores")
GRAPH_PACKAGE = "engine"
INTERNAL = "engine._internal"

MODULE_LEVEL = "module-level"
TYPE_CHECKING_BLOCK = "TYPE_CHECKING"
FUNCTION_LEVEL = "function-level"

HINT = (
    "hint: pass a narrow protocol (or the value) down instead of importing upward; add an ALLOWED "
    "entry in tests/import_graph.py, with its reason, only when a cycle is unavoidable"
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

    def __init__(self, modules: int) -> None:
        self.modules = modules
        self.graph_modules = 0
        self.edges = 0
        self.parse_errors: list[str] = []
        self.cycles: list[str] = []
        self.private: list[str] = []
        self.allow_list: list[str] = []

    @property
    def problems(self) -> list[str]:
        return self.parse_errors + self.allow_list + self.cycles + self.private

    def summary(self) -> str:
        head = (
            f"import graph: {self.graph_modules} {GRAPH_PACKAGE} modules, {self.edges} imports "
            f"between them, {self.modules} modules checked for private imports"
        )
        if not self.problems:
            return f"{head}, no cycles, no private imports"
        counts = [
            f"{len(self.cycles)} cycle(s)",
            f"{len(self.private)} private import(s)",
            f"{len(self.allow_list)} allow-list problem(s)",
        ]
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


def _reaches(graph: dict[str, set[str]], source: str, target: str) -> bool:
    seen = {source}
    queue = [source]
    for node in queue:
        if node == target:
            return True
        for succ in graph[node] - seen:
            seen.add(succ)
            queue.append(succ)
    return False


def analyse(root: Path, allowed: dict[tuple[str, str], str] = ALLOWED) -> Findings:
    """Parse the packages under ``root`` and check their imports against the rules above."""
    modules = discover(root)
    known = set(modules)
    findings = Findings(len(modules))
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
        for imp in collector.imports:
            problem = _private_problem(module, imp)
            if problem is not None:
                findings.private.append(problem)
            target = _resolve(imp.module, known)
            if module in graph and target in graph:
                graph[module].add(target)
                edge_sites = sites.setdefault((module, target), [])
                if not edge_sites or edge_sites[-1].line != imp.site.line:
                    edge_sites.append(imp.site)
    findings.graph_modules = len(graph)
    findings.edges = len(sites)

    for (importer, imported), reason in sorted(allowed.items()):
        entry = f"ALLOWED[({importer!r}, {imported!r})]"
        if (importer, imported) not in sites:
            findings.allow_list.append(
                f"stale allow-list entry: {entry}: {importer} no longer imports {imported}"
            )
        elif not _reaches(graph, imported, importer):
            findings.allow_list.append(
                f"unneeded allow-list entry: {entry}: {imported} does not lead back to "
                f"{importer}, so this import closes no cycle"
            )
        if not reason.strip():
            findings.allow_list.append(f"allow-list entry without a reason: {entry}")

    checked = {m: graph[m] - {n for (i, n) in allowed if i == m} for m in graph}
    for component in strongly_connected(checked):
        node = component[0]
        if len(component) > 1 or node in checked[node]:
            findings.cycles.append(_describe_cycle(component, checked, sites))
    return findings


def check(root: Path, allowed: dict[tuple[str, str], str] = ALLOWED) -> list[str]:
    """Every problem found under ``root``; empty when the import graph is clean."""
    return analyse(root, allowed).problems


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    findings = analyse(root)
    for problem in findings.problems:
        print(problem)
    print(findings.summary())
    return 1 if findings.problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
