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

import argparse
import json
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

TEACHER_MINUTES = {"sst2": 12.0, "mrpc": 8.0}
VARIANTS = ("student-pruned", "student-sparse", "student-shared", "student-svd", "student-embed128", "student-qat",
            "student-ort-dyn", "student-ort-static", "student-torch-int8", "student-int4", "student-bf16",
            "student-ov", "student-ov-int8", "student-trimmed", "student-combined", "student-combined-ov",
            "teacher-ort-dyn", "teacher-ort-static", "teacher-ov", "teacher-ov-int8", "teacher-half", "teacher-small",
            "teacher-small-ov")
MAX_LENGTH = {"sst2": 64, "mrpc": 128}


def _train(minutes: float, lr: float, eval_every: int = 200) -> dict:
    return {"epochs": 20, "budget_minutes": minutes, "lr": lr, "eval_every": eval_every, "checkpoint_every": 400}


def _recover(minutes: float) -> dict:
    return {"objective": {"kd_weight": 1.0, "temperature": 2.0}, "train": _train(minutes, 5e-5, 100)}


def recipe(args, out: Path) -> dict:
    """The whole benchmark as one tinyplm recipe."""
    m, r = args.budget_minutes, args.recover_minutes
    prune = [{"kind": "prune_ffn", "keep": 0.5, "scope": "layer", "recover": _recover(r)},
             {"kind": "prune_heads", "keep": 0.75, "recover": _recover(r)}]
    variants = {
        "student-pruned": prune,
        "student-sparse": [{"kind": "magnitude", "sparsity": 0.7, "recover": _recover(r)}],
        "student-shared": [{"kind": "share", "mode": "all", "groups": [[0, 1], [2]], "recover": _recover(r)}],
        "student-svd": [{"kind": "svd", "energy": 0.9, "roles": ["ffn_in", "ffn_out"], "recover": _recover(r)}],
        "student-embed128": [{"kind": "factorize_embeddings", "rank": 128, "recover": _recover(r)}],
        "student-qat": [{"kind": "qat", "recover": _recover(r)}],
        "student-ort-dyn": [{"kind": "onnx_dynamic_int8"}],
        "student-ort-static": [{"kind": "onnx_static_int8"}],
        "student-torch-int8": [{"kind": "dynamic_int8"}],
        "student-int4": [{"kind": "int4_weight", "group_size": 64}],
        "student-bf16": [{"kind": "bf16"}],
        "student-ov": [{"kind": "openvino"}],
        "student-ov-int8": [{"kind": "openvino_int8"}],
        "student-trimmed": [{"kind": "trim_vocab"}],
        # No factorized embeddings here: on SST-2, E=128 cost 2.9 points after a 2-minute recovery
        # (0.889 -> 0.860); trimming the vocabulary shrinks the table without changing a logit.
        "student-combined": prune + [
            {"kind": "trim_vocab"},
            {"kind": "onnx_dynamic_int8", "embeddings": True}],
        "student-combined-ov": prune + [{"kind": "trim_vocab"}, {"kind": "openvino_int8", "embeddings": True}],
    }
    students = [{"name": "student", "teacher_layers": [1, 3, 5],
                 "objective": {"temperature": 2.0, "kd_weight": 1.0, "hard_weight": 0.5},
                 "train": _train(m, 1e-4)}]
    half = [{"kind": "prune_heads", "keep": 0.5, "scope": "layer", "recover": _recover(r)},
            {"kind": "prune_ffn", "keep": 0.5, "scope": "layer", "recover": _recover(r)}]
    from_teacher = {
        "teacher-ort-dyn": [{"kind": "onnx_dynamic_int8"}],
        "teacher-ort-static": [{"kind": "onnx_static_int8"}],
        "teacher-ov": [{"kind": "openvino"}],
        "teacher-ov-int8": [{"kind": "openvino_int8"}],
        "teacher-half": half,
        # all six layers kept: for small tasks, where a 3-layer student loses more than pruning does
        "teacher-small": half + [{"kind": "trim_vocab"}, {"kind": "onnx_dynamic_int8", "embeddings": True}],
        "teacher-small-ov": half + [{"kind": "trim_vocab"}, {"kind": "openvino_int8", "embeddings": True}],
    }
    chosen = set(VARIANTS) if "all" in args.variants else set(args.variants)
    students += [{"name": name, "init_from": "student", "stages": [], "compress": steps}
                 for name, steps in variants.items() if name in chosen]
    students += [{"name": name, "init_from": "teacher", "stages": [], "compress": steps}
                 for name, steps in from_teacher.items() if name in chosen]
    return {
        "name": f"pareto-{args.task}",
        "output_dir": str(out / "run"),
        "task": {"name": args.task, "max_length": MAX_LENGTH.get(args.task, 128)},
        "teacher": {"model": args.teacher or "minilm-l6",
                    "finetune": None if args.teacher
                    else _train(args.teacher_minutes or TEACHER_MINUTES.get(args.task, 8.0), 1e-4)},
        "students": students,
        "measure": {"rounds": 3},
    }


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
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", required=True, choices=["sst2", "mrpc"])
    p.add_argument("--budget-minutes", type=float, default=6.0, help="the student's distillation budget")
    p.add_argument("--recover-minutes", type=float, default=2.0, help="each recovery distillation's budget")
    p.add_argument("--teacher", help="a fine-tuned teacher dir (default: fine-tune the packaged MiniLM here)")
    p.add_argument("--teacher-minutes", type=float, default=None)
    p.add_argument("--variants", nargs="+", default=["all"], choices=["all", *VARIANTS],
                   help="which variants besides the teacher and the student (default all)")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--fresh", action="store_true", help="delete an earlier run of this benchmark first")
    args = p.parse_args()
    out = args.out or REPO / "runs" / "pareto" / args.task
    if args.fresh and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)

    from tinyplm.config import validate_recipe
    from tinyplm.report.run_info import BenchmarkInfo
    from tinyplm.run import run_or_reuse

    record = run_or_reuse(validate_recipe(recipe(args, out), source="compress_pareto"))
    teacher = record.teacher
    rows = []
    for s in record.stages:
        row = {"stage": s.name, record.metric: s.metrics.get(record.metric), "disk_mb": round(s.disk_bytes / 1e6, 2),
               "smaller": round(teacher.disk_bytes / s.disk_bytes, 2),
               "throughput_sent_per_s": round(s.throughput_sent_per_s, 1), "throughput_batch": s.throughput_batch,
               "speedup": round(s.throughput_sent_per_s / teacher.throughput_sent_per_s, 2),
               "runtime": f"{s.runtime} {s.precision}",
               "retention": round(s.metrics.get(record.metric, 0) / teacher.metrics[record.metric], 4),
               "latency_ms_p50_b1": round(s.latency_ms_p50_b1, 2)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    record.info.benchmark = BenchmarkInfo(name="compress_pareto")
    path = out / "results.json"
    record.save(path)
    plot(record, out)
    print(path)


if __name__ == "__main__":
    sys.exit(main())
