"""The neural-LM family on a spoiler task: every model in one table, and the distillation question.

    python benchmarks/nlm_family.py --task goodreads_spoilers
    python benchmarks/nlm_family.py --task tvtropes_spoilers --student-minutes 1 --teacher-minutes 5

Runs ``recipes/spoilers/<task>_family.yaml`` (a finished run of the same recipe under ``--out`` is
read back, an unfinished one resumed), fitting MiniLM's masked-LM head first for the augmented
stages when ``--out`` does not hold one yet. Prints one JSON row per model (primary metric and the
task's other metrics, points above the TF-IDF floor, params, MB on disk, p50 batch-1 latency,
batch-32 throughput and its ratio to the teacher's), then one JSON summary: each seeded group
(``name-sN``) as mean and spread, and the distilled BiLSTMs against the one trained alone (points
of the primary metric, x the teacher's batch-32 throughput). Every model's dev ROC curve goes into
its stage's ``info["roc"]``; ``plots/roc.png`` and ``plots/metric_vs_latency.png`` are written in
the run dir. The last line is the path of the JSON written (rows and summary).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import _harness as harness

TASKS = ("goodreads_spoilers", "tvtropes_spoilers")
#: The BiLSTM trained alone, and the groups distilled from the teacher compared with it.
ALONE, DISTILLED = "bilstm-alone", ("bilstm-kd", "bilstm-kd-aug")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = harness.parser(__doc__, out="default: runs/nlm_family_<task>", fresh=True)
    p.add_argument("--task", choices=TASKS, default="goodreads_spoilers")
    p.add_argument("--recipe", type=Path, default=None, help="default: recipes/spoilers/<task>_family.yaml")
    p.add_argument("--teacher-minutes", type=float, default=None, help="override the teacher's fine-tuning budget")
    p.add_argument("--student-minutes", type=float, default=None, help="override every trained student's budget")
    p.add_argument("--train-examples", type=int, default=None, help="train on the first N examples (a short run)")
    p.add_argument("--mlm-steps", type=int, default=300, help="steps to fit MiniLM's masked-LM head (augmentation)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="any other recipe override (repeatable)")
    args = p.parse_args(argv)
    args.recipe = args.recipe or harness.REPO / "recipes" / "spoilers" / f"{args.task.split('_')[0]}_family.yaml"
    args.out = args.out or harness.REPO / "runs" / f"nlm_family_{args.task}"
    return args


def overrides(args: argparse.Namespace, base) -> list[str]:
    """Recipe overrides of the recipe ``base``: the run under ``--out``, the MLM head there (when
    it augments), and the budgets asked for (only on students that train: TF-IDF is fitted)."""
    items = [f"output_dir={args.out / 'run'}"]
    if base.augment is not None:
        items.append(f"augment.mlm={args.out / 'mlm'}")
    if args.teacher_minutes:
        items.append(f"teacher.finetune.budget_minutes={args.teacher_minutes}")
    if args.train_examples:
        items.append(f"task.max_train_examples={args.train_examples}")
    for i, spec in enumerate(base.students):
        if args.student_minutes and not (spec.family and spec.family.arch == "tfidf_lr"):
            where = "stages.*.train" if spec.stages else "train"
            items.append(f"students.{i}.{where}.budget_minutes={args.student_minutes}")
    return items + list(args.overrides)


def prepare_mlm(args: argparse.Namespace) -> None:
    """MiniLM with a masked-LM head fitted on the corpus, for the augmented stages (once per --out)."""
    from tinyplm.models import resolve_model_dir
    from tinyplm.pretrain import fit_mlm_head, read_corpus

    if not (args.out / "mlm" / "model.safetensors").is_file():
        corpus = read_corpus(list(harness.CORPUS), max_docs=20000)
        fit_mlm_head(resolve_model_dir("minilm-l6"), corpus, args.out / "mlm", steps=args.mlm_steps)


def add_roc_curves(record, cfg) -> None:
    """Each stage's dev ROC curve into ``stage.info.roc`` (its saved model, its own tokenizer)."""
    from tinyplm.evaluate.model_eval import encode_evals
    from tinyplm.evaluate.roc import model_roc
    from tinyplm.models import load_classifier
    from tinyplm.run import load_task

    data, root = load_task(cfg.task), Path(record.info.run_dir)
    for stage in record.stages:
        if stage.info.roc is not None or not stage.model_dir:
            continue
        model, tok = load_classifier(root / stage.model_dir, data.labels, data.is_regression, data.head)
        curve = model_roc(model, data, encode_evals(data, tok, cfg.task.max_length, cfg.task.max_eval_examples))
        if curve:
            stage.info.roc = curve


def model_rows(record) -> list[dict]:
    """One row per stage (see the module docstring)."""
    from tinyplm.report.roc import floor_stage

    teacher, floor = record.teacher, floor_stage(record)
    base = floor.metrics.get(record.metric) if floor else None
    out = []
    for s in record.stages:
        value = s.metrics.get(record.metric)
        out.append({
            "model": s.name, "arch": (s.shape or {}).get("arch", "transformer"), record.metric: value,
            **{k: round(v, 4) for k, v in s.metrics.items() if k != record.metric and isinstance(v, float)},
            "above_floor_points": round(100 * (value - base), 2) if value is not None and base is not None else None,
            "params_m": round(s.params / 1e6, 3), **harness.size_speed(s),
            "x_teacher_throughput": harness.x_teacher(s, teacher, 1),
        })
    return out


def summary(table: list[dict], metric: str) -> dict:
    """Seeded groups as mean and spread; each distilled BiLSTM group against the one alone."""
    from tinyplm.report.roc import SEEDED

    groups: dict[str, list[dict]] = {}
    for row in table:
        m = SEEDED.match(row["model"])
        if m and row[metric] is not None:
            groups.setdefault(m.group("group"), []).append(row)
    stats = {g: {"seeds": len(rs), "mean": round(statistics.mean(r[metric] for r in rs), 4),
                 "spread": round(max(r[metric] for r in rs) - min(r[metric] for r in rs), 4),
                 "stdev": round(statistics.stdev([r[metric] for r in rs]), 4) if len(rs) > 1 else 0.0,
                 "x_teacher_throughput": round(statistics.mean(r["x_teacher_throughput"] for r in rs), 1)}
             for g, rs in groups.items()}
    versus = {}
    if ALONE in stats:
        for g in DISTILLED:
            if g in stats:
                gain = round(100 * (stats[g]["mean"] - stats[ALONE]["mean"]), 2)
                versus[f"{g} - {ALONE}"] = {"points": gain, "at_least_2_points": gain >= 2.0,
                                            "x_teacher_throughput": stats[g]["x_teacher_throughput"]}
    return {"metric": metric, "groups": stats, "distilled_vs_alone": versus}


def main(argv: list[str] | None = None) -> Path:
    args = parse(argv)  # before the imports below (seconds of them), so --help answers at once
    from tinyplm.config import load_recipe
    from tinyplm.report import write_all

    harness.prepare_out(args.out, args.fresh)
    base = load_recipe(args.recipe)
    cfg = load_recipe(args.recipe, overrides(args, base))
    if cfg.augment is not None:
        prepare_mlm(args)
    record = harness.run_recipe(cfg)
    add_roc_curves(record, cfg)
    # results.json now holds the curves; report.html draws them (report.roc.roc_section)
    written = write_all(record, Path(record.info.run_dir))
    plots = {k: written[k] for k in ("roc", "metric_vs_latency") if k in written}
    table = model_rows(record)
    harness.print_rows(table)
    result = {"benchmark": "nlm_family", "task": args.task, "recipe": str(args.recipe),
              "overrides": overrides(args, base), "rows": table, "summary": summary(table, record.metric),
              "plots": {k: str(v) for k, v in plots.items()}}
    print(json.dumps(result["summary"]), flush=True)
    return harness.finish(args.out / "nlm_family.json", result)


if __name__ == "__main__":
    main()
