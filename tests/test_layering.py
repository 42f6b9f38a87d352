"""Imports go one way (DESIGN.md): config <- tasks <- models <- train <- pretrain, distill <- compress
<- evaluate <- report <- track <- run <- inference <- predict, serve <- cli; errors and files are the base
every layer may use.
(track, experiment tracking, reads the report's records and is opened by the run.)

Every module under src/tinyplm is parsed with ``ast``; every ``tinyplm.X`` import, at module level or
inside a function, must point at the same or an earlier layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "tinyplm"

#: First component under ``tinyplm`` -> layer; -1 is importable by every layer.
LAYERS: dict[str, int] = {
    "": -1,  # tinyplm/__init__.py
    "__main__": 13,
    "errors": -1,
    "files": -1,
    "config": 0,
    "tasks": 1,
    "models": 2,
    "train": 3,
    "pretrain": 4,
    "distill": 5,
    "compress": 6,
    "evaluate": 7,
    "report": 8,
    "track": 9,
    "run": 10,
    "inference": 11,
    "predict": 12,
    "serve": 12,
    "cli": 13,
}

#: Packages that sit beside each other in the design and must not import each other either way.
SIBLINGS = (("pretrain", "distill"), ("predict", "serve"))


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


def layer_of(dotted: str) -> int | None:
    """Layer of a tinyplm module, or None when it is not in the table."""
    parts = dotted.split(".")
    return LAYERS.get(parts[1] if len(parts) > 1 else "")


def imported_modules(source: str, module: str, is_package: bool) -> set[str]:
    """Every tinyplm module that ``source`` (the text of ``module``) imports, anywhere in it."""
    found: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "tinyplm")
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
                found.add(sub if is_module(sub) else target)
    return found


def import_edges() -> list[tuple[str, str]]:
    """(importer, imported) for every tinyplm import in src/tinyplm."""
    edges = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        source = path.read_text(encoding="utf-8")
        for target in sorted(imported_modules(source, module, path.name == "__init__.py")):
            edges.append((module, target))
    return edges


def violations(edges: list[tuple[str, str]]) -> list[str]:
    """Edges that point at a later layer, written 'a (layer) -> b (layer)'."""
    bad = []
    for src, dst in edges:
        a, b = layer_of(src), layer_of(dst)
        if a is not None and b is not None and b > a:
            bad.append(f"{src} (layer {a}) -> {dst} (layer {b})")
    return bad


def test_every_module_has_a_layer() -> None:
    modules = [module_name(p) for p in PACKAGE.rglob("*.py")]
    unknown = sorted(m for m in modules if layer_of(m) is None)
    assert not unknown, f"modules with no layer in tests/test_layering.py LAYERS: {unknown}"


def test_imports_point_only_to_earlier_layers() -> None:
    edges = import_edges()
    # The scan sees real edges (from function bodies too), so an empty result means something.
    assert ("tinyplm.run.pipeline", "tinyplm.report") in edges
    assert ("tinyplm.cli.run", "tinyplm.run") in edges  # imported inside a function
    assert ("tinyplm.run.preflight", "tinyplm.tasks") in edges  # `from tinyplm import tasks`
    bad = violations(edges)
    assert not bad, "imports against the layer order (config <- tasks <- models <- train <- pretrain <- " \
        "distill <- compress <- evaluate <- report <- track <- run <- inference <- predict, serve <- cli):\n  " + \
        "\n  ".join(bad)


def test_siblings_do_not_import_each_other() -> None:
    top = lambda m: m.split(".")[1] if m.count(".") else ""  # noqa: E731
    crossing = [f"{a} -> {b}" for a, b in import_edges() for x, y in SIBLINGS
                if {top(a), top(b)} == {x, y}]
    assert not crossing, "siblings (pretrain and distill; predict and serve) must not import each other:\n  " + \
        "\n  ".join(crossing)


def test_distill_pretrain_and_train_are_separate_layers() -> None:
    assert len({LAYERS["train"], LAYERS["pretrain"], LAYERS["distill"]}) == 3


def test_checker_catches_a_backward_import_inside_a_function() -> None:
    source = "def f():\n    from tinyplm.report import write_all\n    import tinyplm.run\n"
    found = imported_modules(source, "tinyplm.models.io", is_package=False)
    assert found == {"tinyplm.report", "tinyplm.run"}
    assert violations([("tinyplm.models.io", t) for t in sorted(found)]) == [
        "tinyplm.models.io (layer 2) -> tinyplm.report (layer 8)",
        "tinyplm.models.io (layer 2) -> tinyplm.run (layer 10)",
    ]


def test_checker_resolves_relative_imports() -> None:
    source = "from .losses import x\nfrom ..evaluate import size\nfrom .. import errors\n"
    found = imported_modules(source, "tinyplm.distill.objective", is_package=False)
    assert found == {"tinyplm.distill.losses", "tinyplm.evaluate.size", "tinyplm.errors"}
    assert violations([("tinyplm.distill.objective", t) for t in sorted(found)]) == [
        "tinyplm.distill.objective (layer 5) -> tinyplm.evaluate.size (layer 7)",
    ]
