"""What the benchmark scripts share: their common options, recipes kept as YAML, the one rule for
reusing runs, rows of a run's stages, and the JSON whose path is a benchmark's last line of output.

Not a benchmark itself. ``python benchmarks/x.py`` puts benchmarks/ on ``sys.path`` (Python adds
the script's own folder), so a script imports this module as ``from _harness import ...`` with no
path edits; the tests import the scripts and this module the same way (pytest's ``pythonpath`` in
pyproject.toml names benchmarks/).

Recipes: ``benchmarks/recipes/<script>.yaml`` holds the fixed parts of the recipes a script builds.
A value written ``$name`` there is a hole the script fills with :func:`fill` (the task, a budget,
a seed, a path); everything else is what every run of that script uses.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
#: The shipped text corpus (books and wikitext), as the benchmarks that pre-train or augment read it.
CORPUS = (DATA / "corpus" / "books", DATA / "corpus" / "wikitext")
RECIPES = Path(__file__).resolve().parent / "recipes"
_HOLE = re.compile(r"\$([A-Za-z_]\w*)")


# --------------------------------------------------------------------------- options


def parser(doc: str, *, out: Path | str | None = None, fresh: bool = False, seeds: int | None = None,
           budget_minutes: float | None = None, budget_help: str = "training budget per run (minutes)",
           threads: bool = False) -> argparse.ArgumentParser:
    """The script's parser (described by the first line of ``doc``) with the options benchmarks
    share; the script adds its own with ``add_argument``.

    ``out``: a Path is ``--out``'s default; a string is its help, the default then None (the
    script derives it, e.g. from ``--task``); None: no ``--out``. ``fresh``: ``--fresh``.
    ``seeds``, ``budget_minutes``: ``--seeds``, ``--budget-minutes`` with that default.
    ``threads``: ``--threads`` (apply it with :func:`set_threads`)."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    if isinstance(out, Path):
        shown = out.relative_to(REPO) if out.is_relative_to(REPO) else out
        p.add_argument("--out", type=Path, default=out, help=f"default: {shown}")
    elif out is not None:
        p.add_argument("--out", type=Path, default=None, help=out)
    if fresh:
        p.add_argument("--fresh", action="store_true", help="delete an earlier run of this benchmark first")
    if seeds is not None:
        p.add_argument("--seeds", type=int, default=seeds, help="runs of each cell, with seeds 0 .. N-1")
    if budget_minutes is not None:
        p.add_argument("--budget-minutes", type=float, default=budget_minutes, help=budget_help)
    if threads:
        p.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    return p


def set_threads(threads: int | None) -> None:
    """``--threads``: torch's thread count in this process (unchanged when None or 0)."""
    if threads:
        import torch

        torch.set_num_threads(threads)


def prepare_out(out: Path, fresh: bool = False) -> Path:
    """``out`` made (emptied first with ``fresh``: ``--fresh``); -> ``out``."""
    if fresh and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    return out


# --------------------------------------------------------------------------- recipes and runs


def recipes(name: str) -> dict:
    """``benchmarks/recipes/<name>.yaml`` as plain data (YAML aliases made into separate copies)."""
    import yaml

    data = yaml.safe_load((RECIPES / f"{name}.yaml").read_text(encoding="utf-8"))
    return json.loads(json.dumps(data))


def fill(template, **values):
    """A copy of ``template`` with each string ``$name`` in it replaced by ``values[name]``;
    raises ``KeyError`` naming a hole without a value."""
    if isinstance(template, dict):
        return {k: fill(v, **values) for k, v in template.items()}
    if isinstance(template, list):
        return [fill(v, **values) for v in template]
    if isinstance(template, str) and (hole := _HOLE.fullmatch(template)):
        if hole.group(1) not in values:
            raise KeyError(f"{template}: no value given for this hole of the benchmark's recipe")
        return copy.deepcopy(values[hole.group(1)])
    return template


def run_recipe(recipe, source: str | None = None):
    """Run a recipe (a dict, validated here, or a RunConfig) by the one rule for benchmarks,
    ``tinyplm.run.run_or_reuse``: a finished run of exactly this recipe is read back, an unfinished
    one continued, a finished run of another recipe refused (``RunDirError``); -> its RunRecord.
    ``source`` names the recipe in validation errors (default: its name)."""
    from tinyplm.config import validate_recipe
    from tinyplm.run import run_or_reuse

    if isinstance(recipe, dict):
        recipe = validate_recipe(recipe, source=source or recipe.get("name", "benchmark"))
    return run_or_reuse(recipe)


# --------------------------------------------------------------------------- rows and output


def retention(value: float | None, reference: float | None) -> float | None:
    """``value / reference`` to 4 places; None without both (or with a zero reference)."""
    return round(value / reference, 4) if value is not None and reference else None


def size_speed(stage) -> dict:
    """A stage's MB on disk, batch-1 p50 latency (ms) and batch throughput (sentences/s), rounded."""
    return {"disk_mb": round(stage.disk_bytes / 1e6, 2), "latency_ms_p50_b1": round(stage.latency_ms_p50_b1, 2),
            "throughput_sent_per_s": round(stage.throughput_sent_per_s, 1)}


def x_teacher(stage, teacher, digits: int = 2) -> float:
    """The stage's batch throughput as a multiple of the teacher's."""
    return round(stage.throughput_sent_per_s / teacher.throughput_sent_per_s, digits)


def rows(record, extra_metrics: tuple[str, ...] = ()) -> list[dict]:
    """One row per stage: the primary metric (and ``extra_metrics``), its retention of the
    teacher's, parameters, size and speed."""
    teacher = record.teacher
    out = []
    for s in record.stages:
        primary = s.metrics.get(record.metric)
        row = {"stage": s.name, record.metric: primary}
        row.update({k: s.metrics[k] for k in extra_metrics if k in s.metrics})
        row["retention"] = retention(primary, teacher.metrics.get(record.metric))
        row.update({f"retention_{k}": retention(s.metrics.get(k), teacher.metrics.get(k))
                    for k in extra_metrics if k in s.metrics and k.startswith(record.metric)})
        row["params_m"] = round(s.params / 1e6, 2)
        row.update(size_speed(s))
        row.update({"throughput_batch": s.throughput_batch, "speedup": x_teacher(s, teacher)})
        out.append(row)
    return out


def print_rows(items: list[dict]) -> None:
    """Each row as one JSON line on stdout, as it is ready."""
    for row in items:
        print(json.dumps(row), flush=True)


def save(path: Path, data) -> Path:
    """``data`` (a dict, or a RunRecord) as JSON at ``path``, written atomically; -> ``path``."""
    if isinstance(data, dict):
        from tinyplm.files import write_json_atomic

        write_json_atomic(path, data)
    else:
        data.save(path)
    return path


def finish(path: Path, data=None) -> Path:
    """:func:`save` ``data`` at ``path`` when given, then print ``path``: a benchmark's last line of
    output; -> ``path``."""
    if data is not None:
        save(path, data)
    print(path)
    return path


# --------------------------------------------------------------------------- one shipped recipe


def recipe_parser(doc: str, recipe: Path, out: Path) -> argparse.ArgumentParser:
    """The options of a benchmark that runs one shipped recipe (SQuAD, CoNLL-2003)."""
    p = parser(doc, out=out, fresh=True)
    p.add_argument("--recipe", type=Path, default=recipe, help=f"default: {recipe.relative_to(REPO)}")
    p.add_argument("--teacher-minutes", type=float, default=None, help="override the teacher's fine-tuning budget")
    p.add_argument("--student-minutes", type=float, default=None, help="override the student's distillation budget")
    p.add_argument("--data-dir", type=Path, default=None, help="data root (default: ../shared/data)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="any other recipe override, e.g. task.max_length=192 (repeatable)")
    return p


def shipped_overrides(args: argparse.Namespace) -> list[str]:
    """Recipe overrides from the command line; the run always goes under ``--out``."""
    items = [f"output_dir={args.out / 'run'}"]
    if args.teacher_minutes:
        items.append(f"teacher.finetune.budget_minutes={args.teacher_minutes}")
    if args.student_minutes:
        items.append(f"students.*.train.budget_minutes={args.student_minutes}")
    if args.data_dir:
        items.append(f"task.data_dir={args.data_dir}")
    return items + list(args.overrides)


def run_shipped(args: argparse.Namespace, benchmark: str):
    """Run (or continue, or read back) the shipped recipe with the command line's overrides;
    -> its RunRecord, naming the benchmark."""
    from tinyplm.config import load_recipe
    from tinyplm.report.run_info import BenchmarkInfo

    prepare_out(args.out, args.fresh)
    record = run_recipe(load_recipe(args.recipe, shipped_overrides(args)))
    record.info.benchmark = BenchmarkInfo(name=benchmark, recipe=str(args.recipe), overrides=shipped_overrides(args))
    return record


def recipe_benchmark(doc: str, recipe: Path, benchmark: str, extra_metrics: tuple[str, ...] = ()) -> Path:
    """A shipped recipe as a benchmark: parse the command line, run the recipe, print one JSON row
    per stage, write ``<out>/results.json`` and print its path."""
    args = recipe_parser(doc, recipe, REPO / "runs" / benchmark).parse_args()
    record = run_shipped(args, benchmark)
    print_rows(rows(record, extra_metrics))
    return finish(args.out / "results.json", record)
