"""Which top-level package of tinyplm may import which: :data:`ALLOWED` below is the one table, and the
only place the order of the layers is written (DESIGN.md's "Layout" describes it, docs point here).

Every module under src/tinyplm is parsed with ``ast``; every ``tinyplm.X`` import, at module level or
inside a function, is checked against the table both ways: each import is an edge of the table, and
each edge of the table is an import somewhere, so the table is exactly what the code does. The table
has no cycle, and the packages that sit side by side (:data:`SIBLINGS`) never import each other.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGE = SRC / "tinyplm"

#: The base (errors, atomic files, the Ray connection of the scale-out commands): every package outside
#: it may import these, and the table does not repeat them.
BASE = frozenset({"errors", "files", "cluster"})

#: Top-level package (or module) -> the packages it imports, besides :data:`BASE` and itself.
#: ``__init__`` is tinyplm/__init__.py (the version), ``__main__`` is ``python -m tinyplm``.
ALLOWED: dict[str, frozenset[str]] = {
    "errors": frozenset(),
    "files": frozenset({"errors"}),
    "cluster": frozenset({"errors"}),
    "__init__": frozenset(),
    "config": frozenset(),
    "tasks": frozenset(),
    "models": frozenset({"config", "tasks"}),
    "train": frozenset({"config", "tasks", "models"}),
    "pretrain": frozenset({"config", "tasks", "models", "train"}),
    "distill": frozenset({"config", "tasks", "models", "train"}),
    "compress": frozenset({"config", "tasks", "models", "train"}),
    "evaluate": frozenset({"config", "tasks", "models"}),
    "report": frozenset({"__init__", "models", "evaluate"}),
    "track": frozenset({"config", "report"}),
    "run": frozenset({"config", "tasks", "models", "train", "pretrain", "distill", "compress", "evaluate", "report",
                      "track"}),
    "inference": frozenset({"config", "tasks", "models", "evaluate"}),
    "predict": frozenset({"tasks", "inference"}),
    "serve": frozenset({"tasks", "models", "inference"}),
    "sweep": frozenset({"config", "train", "report", "track", "run"}),
    "cli": frozenset({"config", "tasks", "models", "train", "pretrain", "distill", "evaluate", "report", "track",
                      "run", "inference", "predict", "serve", "sweep"}),
    "__main__": frozenset({"cli"}),
}

#: Packages that sit beside each other on one layer and import each other in neither direction (a
#: name here that src/tinyplm lacks, ``sweep`` until it is there, constrains nothing).
SIBLINGS: tuple[frozenset[str], ...] = (frozenset({"pretrain", "distill"}), frozenset({"predict", "serve", "sweep"}))


@dataclass(frozen=True)
class Import:
    """One ``tinyplm`` import: ``where`` (path:line), the importing module and the imported one."""

    where: str
    importer: str
    imported: str

    @property
    def edge(self) -> tuple[str, str]:
        return package_of(self.importer), package_of(self.imported)

    def __str__(self) -> str:
        return f"{self.where}: {self.importer} imports {self.imported}"


def package_of(dotted: str) -> str:
    """tinyplm.a.b -> a; tinyplm -> __init__; tinyplm.__main__ -> __main__."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(path: Path) -> str:
    """src/tinyplm/a/b.py -> tinyplm.a.b; src/tinyplm/a/__init__.py -> tinyplm.a."""
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(dotted: str) -> bool:
    """Whether ``dotted`` (tinyplm.x.y) is a module or package in src."""
    base = SRC.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imported_modules(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, tinyplm module) for every tinyplm import in ``source`` (the text of ``module``), anywhere."""
    found: list[tuple[int, str]] = []
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "tinyplm"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "tinyplm":
                continue
            for alias in node.names:  # `from tinyplm import tasks` imports tinyplm.tasks
                sub = f"{target}.{alias.name}"
                found.append((node.lineno, sub if is_module(sub) else target))
    return sorted(set(found))


def scan() -> list[Import]:
    """Every tinyplm import in src/tinyplm."""
    imports = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        source = path.read_text(encoding="utf-8")
        for line, target in imported_modules(source, module, path.name == "__init__.py"):
            imports.append(Import(f"{path.relative_to(ROOT)}:{line}", module, target))
    return imports


def may_import(importer: str, imported: str, table: dict[str, frozenset[str]]) -> bool:
    """Whether package ``importer`` may import package ``imported`` under ``table``."""
    return importer == imported or imported in table.get(importer, ()) or (
        imported in BASE and importer not in BASE)


def disallowed(imports: list[Import], table: dict[str, frozenset[str]]) -> list[str]:
    """Each import the table does not allow, with what its package may import."""
    bad = []
    for imp in imports:
        a, b = imp.edge
        if not may_import(a, b, table):
            may = ", ".join(sorted(table.get(a, frozenset()) | (BASE if a not in BASE else frozenset()))) or "nothing"
            bad.append(f"{imp}, but {a} may import only: {may}")
    return bad


def unused(imports: list[Import], table: dict[str, frozenset[str]]) -> list[str]:
    """Each edge of the table that no import makes."""
    used = {imp.edge for imp in imports}
    return [f"ALLOWED[{a!r}] lists {b!r}, but no module of tinyplm.{a} imports tinyplm.{b}"
            for a, targets in sorted(table.items()) for b in sorted(targets) if (a, b) not in used]


def cycle(table: dict[str, frozenset[str]]) -> list[str] | None:
    """One cycle of ``table`` (with the base edges) as [a, b, ..., a], or None when there is none."""
    edges = {a: set(t) | (set(BASE) if a not in BASE else set()) for a, t in table.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt, [*path, nxt])):
                return found
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (found := visit(start, [start])):
            return found
    return None


def crossings(imports: list[Import], siblings=SIBLINGS) -> list[str]:
    """Each import between two siblings."""
    return [f"{imp}: {a} and {b} are siblings and must not import each other"
            for imp in imports for a, b in [imp.edge] if a != b and any({a, b} <= group for group in siblings)]


# -- the real code against the table ------------------------------------------------------------------

def test_the_scan_sees_imports_inside_functions_and_from_package_imports() -> None:
    edges = {(imp.importer, imp.imported) for imp in scan()}
    assert ("tinyplm.run.pipeline", "tinyplm.report") in edges
    assert ("tinyplm.cli.run", "tinyplm.run") in edges  # imported inside a function
    assert ("tinyplm.run.preflight", "tinyplm.tasks") in edges  # `from tinyplm import tasks`


def test_the_table_names_every_package_and_only_those() -> None:
    present = {package_of(module_name(p)) for p in PACKAGE.rglob("*.py")}
    assert not present - ALLOWED.keys(), \
        f"packages of src/tinyplm missing from ALLOWED in tests/test_layering.py: {sorted(present - ALLOWED.keys())}"
    assert not ALLOWED.keys() - present, \
        f"ALLOWED in tests/test_layering.py names packages src/tinyplm lacks: {sorted(ALLOWED.keys() - present)}"
    targets = {b for t in ALLOWED.values() for b in t}
    assert targets <= ALLOWED.keys(), f"ALLOWED lists targets that are no package: {sorted(targets - ALLOWED.keys())}"


def test_every_import_is_allowed_by_the_table() -> None:
    bad = disallowed(scan(), ALLOWED)
    assert not bad, "imports that tests/test_layering.py ALLOWED does not allow:\n  " + "\n  ".join(bad)


def test_every_edge_of_the_table_is_an_import() -> None:
    stale = unused(scan(), ALLOWED)
    assert not stale, "edges of tests/test_layering.py ALLOWED that the code does not use (drop them):\n  " + \
        "\n  ".join(stale)


def test_the_table_has_no_cycle() -> None:
    found = cycle(ALLOWED)
    assert found is None, "tests/test_layering.py ALLOWED has a cycle: " + " -> ".join(found or [])


def test_siblings_do_not_import_each_other() -> None:
    in_table = [f"ALLOWED[{a!r}] lists {b!r}" for group in SIBLINGS for a in sorted(group)
                for b in sorted(ALLOWED.get(a, frozenset()) & group)]
    assert not in_table, "siblings allowed to import each other:\n  " + "\n  ".join(in_table)
    crossing = crossings(scan())
    assert not crossing, "imports between siblings:\n  " + "\n  ".join(crossing)


def test_the_order_is_written_only_in_this_file() -> None:
    arrow = re.compile(rf"\b({'|'.join(ALLOWED)})\s*<-\s*({'|'.join(ALLOWED)})\b")
    pages = [*PACKAGE.rglob("*.py"), *(ROOT / "docs").rglob("*.md"), ROOT / "README.md"]
    found = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in pages if p.is_file()
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if arrow.search(line)]
    assert not found, "the layer order is written outside tests/test_layering.py (point here instead):\n  " + \
        "\n  ".join(found)


# -- the checker itself -------------------------------------------------------------------------------

def test_checker_catches_a_backward_import_inside_a_function() -> None:
    source = "def f():\n    from tinyplm.report import write_all\n    import tinyplm.run\n"
    found = imported_modules(source, "tinyplm.models.io", is_package=False)
    assert found == [(2, "tinyplm.report"), (3, "tinyplm.run")]
    imports = [Import(f"io.py:{line}", "tinyplm.models.io", target) for line, target in found]
    may = "but models may import only: cluster, config, errors, files, tasks"
    assert disallowed(imports, ALLOWED) == [
        f"io.py:2: tinyplm.models.io imports tinyplm.report, {may}",
        f"io.py:3: tinyplm.models.io imports tinyplm.run, {may}",
    ]


def test_checker_resolves_relative_imports() -> None:
    source = "from .matching import x\nfrom ..evaluate import size\nfrom .. import errors\n"
    found = imported_modules(source, "tinyplm.distill.objective", is_package=False)
    assert {target for _, target in found} == {"tinyplm.distill.matching", "tinyplm.evaluate.size", "tinyplm.errors"}
    imports = [Import("objective.py", "tinyplm.distill.objective", target) for _, target in found]
    assert [b for imp in imports for a, b in [imp.edge] if not may_import(a, b, ALLOWED)] == ["evaluate"]


def test_checker_finds_unused_edges_cycles_and_sibling_imports() -> None:
    table = {"errors": frozenset(), "files": frozenset({"errors"}), "a": frozenset({"b"}), "b": frozenset({"c"}),
             "c": frozenset({"a"})}
    assert cycle(table) == ["a", "b", "c", "a"]
    assert cycle({**table, "c": frozenset()}) is None
    assert cycle({**table, "errors": frozenset({"a"})}) is not None  # a base that imports a layer
    imports = [Import("a.py:1", "tinyplm.a", "tinyplm.b.x"), Import("b.py:1", "tinyplm.b", "tinyplm.errors")]
    assert unused(imports, table) == [
        "ALLOWED['b'] lists 'c', but no module of tinyplm.b imports tinyplm.c",
        "ALLOWED['c'] lists 'a', but no module of tinyplm.c imports tinyplm.a",
        "ALLOWED['files'] lists 'errors', but no module of tinyplm.files imports tinyplm.errors",
    ]
    assert crossings(imports, (frozenset({"a", "b"}),)) == [
        "a.py:1: tinyplm.a imports tinyplm.b.x: a and b are siblings and must not import each other"]
