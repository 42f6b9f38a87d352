"""Compression Pareto front: what each paradigm buys on top of distillation, measured in one run.

    python benchmarks/compress_pareto.py --task sst2
    python benchmarks/compress_pareto.py --task mrpc --budget-minutes 4

One recipe, one run (so every model is measured side by side on the same machine state):

  teacher                the packaged MiniLM-L6 fine-tuned on the task
  student                3 of its 6 layers (DistilBERT-style init), prediction-layer KD
  student-<paradigm>     the student plus one paradigm, each with KD recovery where it trains:
                         structured pruning (half the FFN, a quarter of the heads), magnitude
                         sparsity, ALBERT sharing, SVD, factorized embeddings, vocabulary
                         trimming, QAT, dynamic/static int8 (ONNX Runtime), torch dynamic
                         int8, 4-bit weights, bf16, OpenVINO (its default precision) and
                         OpenVINO + NNCF int8
  student-combined       FFN and head pruning, the vocabulary trimmed to the task's pieces, then
                         ONNX Runtime dynamic int8 with int8 embeddings: the small-and-fast recipe;
  student-combined-ov    the same, ending in OpenVINO + NNCF int8 with int8 embeddings
  teacher-<...>          the teacher itself: ONNX Runtime dynamic and static int8, OpenVINO and
                         OpenVINO int8; half its heads and half its FFN with KD recovery
                         (teacher-half); and that, with the vocabulary trimmed and ONNX Runtime
                         int8 (teacher-small) or OpenVINO int8 (teacher-small-ov)

Writes ``<out>/results.json`` (the core's results.json schema: one stage per variant, the teacher
stage named ``teacher``), ``pareto_latency.png`` and ``pareto_size.png`` (accuracy vs batch-1
latency and vs size on disk, the Pareto front drawn), and prints one JSON row per stage.
Its last line of output is the JSON's path.
"""

from __future__ import annotations

from pathlib import Path

import _harness as harness

TEACHER_MINUTES = {"sst2": 12.0, "mrpc": 8.0}
MAX_LENGTH = {"sst2": 64, "mrpc": 128}
#: The recipe, its variable parts written $name (benchmarks/recipes/compress_pareto.yaml).
RECIPE = harness.recipes("compress_pareto")["recipe"]
#: Every variant besides the teacher and the student, in the recipe's order.
VARIANTS = tuple(s["name"] for s in RECIPE["students"][1:])


def recipe(args, out: Path) -> dict:
    """The whole benchmark as one tinyplm recipe: the student and the variants ``args.variants``
    chooses (``all``: every one), the budgets and the teacher from the command line."""
    raw = harness.fill(RECIPE, name=f"pareto-{args.task}", output_dir=str(out / "run"), task=args.task,
               max_length=MAX_LENGTH.get(args.task, 128), teacher=args.teacher or "minilm-l6",
               teacher_minutes=args.teacher_minutes or TEACHER_MINUTES.get(args.task, 8.0),
               student_minutes=args.budget_minutes, recover_minutes=args.recover_minutes)
    if args.teacher:  # a fine-tuned teacher is used as it is
        raw["teacher"]["finetune"] = None
    chosen = set(VARIANTS) if "all" in args.variants else set(args.variants)
    raw["students"] = [s for s in raw["students"] if s["name"] == "student" or s["name"] in chosen]
    return raw


def pareto(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats on both axes (lower x, higher y)."""
    front = []
    for i, (x, y) in enumerate(points):
        if not any((x2 <= x and y2 >= y) and (x2, y2) != (x, y) for x2, y2 in points):
            front.append(i)
    return sorted(front, key=lambda i: points[i][0])


def final_stages(record) -> list:
    """The stages no other stage continues from: the teacher, the student and each variant's last step."""
    continued = {s.parent for s in record.stages}
    return [s for s in record.stages if s.name not in continued or s.name in ("teacher", "student")]


def short_name(name: str) -> str:
    """``student-combined.onnx_dynamic_int8`` -> ``student-combined`` (the variant, not its last step)."""
    return name.split(".", 1)[0]


def plot(record, out: Path) -> None:
    """Accuracy vs latency and vs size; each variant's final model labelled, its earlier steps faint."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    finals = {s.name for s in final_stages(record)}
    for key, label, fname in (("latency_ms_p50_b1", "batch-1 latency p50 (ms)", "pareto_latency.png"),
                              ("disk_bytes", "size on disk (MB)", "pareto_size.png")):
        def xy(s, key=key):
            x = getattr(s, key) / 1e6 if key == "disk_bytes" else getattr(s, key)
            return x, s.metrics.get(record.metric, 0.0)

        shown = [s for s in record.stages if s.name in finals]
        pts = [xy(s) for s in shown]
        fig, ax = plt.subplots(figsize=(9, 5.5))
        steps = [xy(s) for s in record.stages if s.name not in finals]
        if steps:
            ax.scatter(*zip(*steps, strict=True), color="#bbbbbb", s=14, label="intermediate compression steps")
        for s, (x, y) in zip(shown, pts, strict=True):
            teacherish = s.name.startswith("teacher")
            ax.scatter(x, y, color="#c0392b" if teacherish else "#2a7f62", s=30)
            ax.annotate(short_name(s.name), (x, y), fontsize=7, xytext=(4, 2), textcoords="offset points")
        front = pareto(pts)
        ax.plot([pts[i][0] for i in front], [pts[i][1] for i in front], "--", color="#555", lw=1, label="Pareto front")
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in "25" else ""))
        ax.set_xlabel(label + " (log scale)")
        ax.set_ylabel(f"{record.task} dev {record.metric}")
        ax.set_title(f"Compression on {record.task}: {record.metric} vs {label.split(' (')[0]} (red: from the teacher)")
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=8)
        fig.tight_layout()
        fig.savefig(out / fname, dpi=120)
        plt.close(fig)


def main() -> None:
    p = harness.parser(__doc__, out="default: runs/pareto/<task>", fresh=True, budget_minutes=6.0,
                       budget_help="the student's distillation budget")
    p.add_argument("--task", required=True, choices=["sst2", "mrpc"])
    p.add_argument("--recover-minutes", type=float, default=2.0, help="each recovery distillation's budget")
    p.add_argument("--teacher", help="a fine-tuned teacher dir (default: fine-tune the packaged MiniLM here)")
    p.add_argument("--teacher-minutes", type=float, default=None)
    p.add_argument("--variants", nargs="+", default=["all"], choices=["all", *VARIANTS],
                   help="which variants besides the teacher and the student (default all)")
    args = p.parse_args()
    out = harness.prepare_out(args.out or harness.REPO / "runs" / "pareto" / args.task, args.fresh)

    from tinyplm.report.run_info import BenchmarkInfo

    record = harness.run_recipe(recipe(args, out), source="compress_pareto")
    harness.print_rows([row(s, record) for s in record.stages])
    record.info.benchmark = BenchmarkInfo(name="compress_pareto")
    path = out / "results.json"
    record.save(path)
    plot(record, out)
    harness.finish(path)


def row(stage, record) -> dict:
    """One stage against the teacher: metric, size, speed, runtime and retention."""
    teacher, metric = record.teacher, record.metric
    return {"stage": stage.name, metric: stage.metrics.get(metric), **harness.size_speed(stage),
            "smaller": round(teacher.disk_bytes / stage.disk_bytes, 2), "throughput_batch": stage.throughput_batch,
            "speedup": harness.x_teacher(stage, teacher), "runtime": f"{stage.runtime} {stage.precision}",
            "retention": harness.retention(stage.metrics.get(metric, 0), teacher.metrics[metric])}

if __name__ == "__main__":
    main()
