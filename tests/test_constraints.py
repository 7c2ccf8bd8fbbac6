"""`.ci/constraints.txt` pins everything `make install` puts in the venv for the package and its
dev extra, at the version installed: a dependency added to pyproject.toml without `make lock`
would float again, and so would the next CI run."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name

CONSTRAINTS = Path(__file__).resolve().parents[1] / ".ci" / "constraints.txt"


def pinned() -> dict[NormalizedName, str]:
    pins: dict[NormalizedName, str] = {}
    for line in CONSTRAINTS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def installed_closure(root: str, extras: set[str]) -> dict[NormalizedName, str]:
    """Every distribution `root[extras]` pulls in, by name, with its installed version."""
    found: dict[NormalizedName, str] = {}
    todo = [(root, frozenset(extras))]
    seen: set[tuple[NormalizedName, frozenset[str]]] = set()
    while todo:
        name, wanted = todo.pop()
        key = (canonicalize_name(name), wanted)
        if key in seen:
            continue
        seen.add(key)
        dist = metadata.distribution(name)
        found[key[0]] = dist.version
        for text in dist.requires or []:
            requirement = Requirement(text)
            applies = requirement.marker is None or any(
                requirement.marker.evaluate({**default_environment(), "extra": extra})
                for extra in {"", *wanted}
            )
            if applies:
                todo.append((requirement.name, frozenset(requirement.extras)))
    return found


def test_every_package_of_the_dev_install_is_pinned_at_its_installed_version() -> None:
    pins = pinned()
    closure = installed_closure("mcp-engine", {"dev"})
    del closure[canonicalize_name("mcp-engine")]
    unpinned = sorted(name for name in closure if name not in pins)
    assert not unpinned, f"not in {CONSTRAINTS.name}: {unpinned}; run make lock, then make test"
    drifted = {name: (v, pins[name]) for name, v in closure.items() if v != pins[name]}
    assert not drifted, f"installed != pinned: {drifted}; run make install (or make lock)"


def test_the_closure_follows_extras_and_markers() -> None:
    closure = installed_closure("mcp-engine", {"dev"})
    assert {"redis", "hiredis", "pytest", "mcp"} <= set(closure)  # hiredis: redis's own extra
    assert "pytest" not in installed_closure("mcp-engine", set())  # dev only
