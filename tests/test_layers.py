"""The import-direction law: a kevolve module imports only from its own layer or below, and
no set of modules imports itself around a circle (imports inside functions count too: a
deferred import hides a cycle, it does not remove it).

Layers, lowest first (the package diagram in docs/architecture.md):

    errors, assets → ir → ops, schedule → plan → backends → pipeline, api → evaluate
      → archive → search → bench, export → torch → commands, cli
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "kevolve"

# Module prefix -> layer. The longest matching prefix wins.
LAYERS: dict[str, int] = {
    "kevolve": 5,  # the package's lazy face over api
    "kevolve.errors": 0,
    "kevolve.assets": 0,
    "kevolve.ir": 1,
    "kevolve.ops": 2,
    "kevolve.schedule": 2,
    "kevolve.plan": 3,
    "kevolve.backends": 4,
    "kevolve.pipeline": 5,
    "kevolve.api": 5,
    "kevolve.evaluate": 6,
    "kevolve.archive": 7,
    "kevolve.search": 8,
    "kevolve.bench": 9,
    "kevolve.export": 9,
    "kevolve.torch": 10,
    "kevolve.commands": 11,
    "kevolve.cli": 11,
    "kevolve.__main__": 11,
}

# (importer, imported) pairs allowed to break the law, and cycles allowed to stand: none.
# A new violation fails the test; so does a line here that no longer applies.
ALLOWED: set[tuple[str, str]] = set()
ALLOWED_CYCLES: set[frozenset[str]] = set()


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def layer(mod: str) -> int:
    """The layer of the longest prefix in LAYERS that names `mod` or a package above it."""
    best = [p for p in LAYERS if mod == p or (p != "kevolve" and mod.startswith(p + "."))]
    if not best:
        raise KeyError(f"{mod} is in no layer: add it to LAYERS in tests/test_layers.py")
    return LAYERS[max(best, key=len)]


def imports(mod: str, path: Path, known: set[str]) -> set[str]:
    """The kevolve modules `mod` imports, anywhere in its body (TYPE_CHECKING blocks
    excepted: they never run)."""
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    package = mod if is_pkg else mod.rpartition(".")[0]
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            # `from pkg import mod` imports the module; `from mod import name` the module
            names = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in known else stem
                     for a in node.names]
        else:
            continue
        for n in names:
            while n and n not in known:
                n = n.rpartition(".")[0]
            if n.startswith("kevolve") and n != mod:
                out.add(n)
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {m: imports(m, p, known) for m, p in mods.items()}


def upward(g: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {(a, b) for a, deps in g.items() for b in deps
            if layer(b) > layer(a)}


def cycles(g: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(frozenset(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_every_module_has_a_layer():
    for m in modules():
        layer(m)  # raises KeyError for a module outside every prefix


def test_no_upward_imports():
    found = upward(graph())
    new = sorted(found - ALLOWED)
    assert not new, "upward imports (importer -> imported):\n" + "\n".join(
        f"  {a} (layer {layer(a)}) -> {b} (layer {layer(b)})" for a, b in new)
    stale = sorted(ALLOWED - found)
    assert not stale, f"allowlisted imports that no longer exist (delete them): {stale}"


def test_no_import_cycles():
    found = set(cycles(graph()))
    new = [sorted(c) for c in found - ALLOWED_CYCLES]
    assert not new, f"import cycles: {new}"
    stale = [sorted(c) for c in ALLOWED_CYCLES - found]
    assert not stale, f"allowlisted cycles that no longer exist (delete them): {stale}"


@pytest.mark.parametrize("src,dst,expect", [
    ("kevolve.ir.nodes", "kevolve.backends.base", True),
    ("kevolve.backends.base", "kevolve.ir.nodes", False),
    ("kevolve.ops.base", "kevolve.schedule.trace", False),
])
def test_the_law_itself(src, dst, expect):
    assert ((src, dst) in upward({src: {dst}})) is expect


def test_cycle_finder_finds_a_circle():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(g) == [frozenset({"a", "b", "c"})]
