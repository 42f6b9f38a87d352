"""Shared driver for the benchmarks that run one shipped recipe (SQuAD, CoNLL-2003).

Not a benchmark itself: ``squad.py`` and ``conll.py`` call :func:`main` with their recipe and the
acceptance figures to print. A run directory that already holds a finished ``results.json`` is
read instead of trained again; an unfinished one is resumed.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def parser(doc: str, recipe: Path, default_out: Path) -> argparse.ArgumentParser:
    """The options every recipe benchmark takes."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--recipe", type=Path, default=recipe, help=f"default: {recipe.relative_to(REPO)}")
    p.add_argument("--teacher-minutes", type=float, default=None, help="override the teacher's fine-tuning budget")
    p.add_argument("--student-minutes", type=float, default=None, help="override the student's distillation budget")
    p.add_argument("--data-dir", type=Path, default=None, help="data root (default: ../shared/data)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="any other recipe override, e.g. task.max_length=192 (repeatable)")
    p.add_argument("--out", type=Path, default=default_out)
    p.add_argument("--fresh", action="store_true", help="delete an earlier run of this benchmark first")
    return p


def overrides(args: argparse.Namespace) -> list[str]:
    """Recipe overrides from the command line; the run always goes under ``--out``."""
    items = [f"output_dir={args.out / 'run'}"]
    if args.teacher_minutes:
        items.append(f"teacher.finetune.budget_minutes={args.teacher_minutes}")
    if args.student_minutes:
        items.append(f"students.*.train.budget_minutes={args.student_minutes}")
    if args.data_dir:
        items.append(f"task.data_dir={args.data_dir}")
    return items + list(args.overrides)


def run_recipe(args: argparse.Namespace, benchmark: str):
    """Run (or resume, or read back) the recipe; return its RunRecord."""
    from tinyplm.config import load_recipe
    from tinyplm.report.run_info import BenchmarkInfo
    from tinyplm.run import run_or_reuse

    if args.fresh and args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True, exist_ok=True)
    record = run_or_reuse(load_recipe(args.recipe, overrides(args)))
    record.info.benchmark = BenchmarkInfo(name=benchmark, recipe=str(args.recipe), overrides=overrides(args))
    return record


def rows(record, extra_metrics: tuple[str, ...] = ()) -> list[dict]:
    """One row per stage: the primary metric, its retention of the teacher's, size and speed."""
    teacher = record.teacher
    out = []
    for s in record.stages:
        primary = s.metrics.get(record.metric)
        row = {"stage": s.name, record.metric: primary}
        row.update({k: s.metrics[k] for k in extra_metrics if k in s.metrics})
        row["retention"] = _ratio(primary, teacher.metrics.get(record.metric))
        row.update({f"retention_{k}": _ratio(s.metrics.get(k), teacher.metrics.get(k))
                    for k in extra_metrics if k in s.metrics and k.startswith(record.metric)})
        row.update({
            "params_m": round(s.params / 1e6, 2), "disk_mb": round(s.disk_bytes / 1e6, 2),
            "latency_ms_p50_b1": round(s.latency_ms_p50_b1, 2),
            "throughput_sent_per_s": round(s.throughput_sent_per_s, 1), "throughput_batch": s.throughput_batch,
            "speedup": round(s.throughput_sent_per_s / teacher.throughput_sent_per_s, 2),
        })
        out.append(row)
    return out


def _ratio(value: float | None, reference: float | None) -> float | None:
    return round(value / reference, 4) if value is not None and reference else None


def main(doc: str, recipe: Path, benchmark: str, extra_metrics: tuple[str, ...] = ()) -> None:
    """Parse the command line, run the recipe, print one JSON row per stage and the JSON's path."""
    args = parser(doc, recipe, REPO / "runs" / benchmark).parse_args()
    record = run_recipe(args, benchmark)
    for row in rows(record, extra_metrics):
        print(json.dumps(row), flush=True)
    path = args.out / "results.json"
    record.save(path)
    print(path)
