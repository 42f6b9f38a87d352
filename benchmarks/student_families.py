"""BERT-, RoBERTa- and DeBERTa-style students of one size distilled from one fine-tuned teacher.

    nice -n 10 .venv/bin/python benchmarks/student_families.py --teacher runs/sst2_teacher --task sst2 \\
        --max-steps 1500 --max-train-examples 20000

Each student is the same shape (default 4 layers, hidden 256, 4 heads, FFN 1024), built by
``models.student.build_student(..., arch=...)`` with the same init for every architecture: its
word table from the teacher's, projected on the table's top principal directions
(``--word-embeddings``, default; the one part whose shape matches across families), everything
else from scratch (seeded), and trained by
the one loop for the same number of steps on the same batches with the same objective:
prediction-layer KD (soft targets at temperature T, plus hard labels) and hidden-state KD
(TinyBERT's MSE through a learned projection, uniform layer map). The teacher's logits come from
the shared cache. Steps, not minutes, are equal: the machine is shared, so a time budget would
measure the neighbours. Each student is saved, reloaded (identical logits checked), and its dev
metric, parameters, MB on disk, batch-1 latency and batch-32 throughput are printed with the gap
to the BERT student in points. The recipe's ``students[].arch`` needs a schema field (see
/work/notes/families-tf.md), so this script calls the library directly.
Last output line: the JSON path.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import _harness as harness

ARCHS = ("bert", "roberta", "deberta")


def parse_args() -> argparse.Namespace:
    p = harness.parser(__doc__, out=harness.REPO / "runs" / "student_families", threads=True)
    p.add_argument("--teacher", type=Path, required=True, help="a fine-tuned teacher dir (any arch in the role table)")
    p.add_argument("--task", default="sst2")
    p.add_argument("--archs", type=lambda s: s.split(","), default=list(ARCHS), help="comma-separated student archs")
    p.add_argument("--shape", type=lambda s: [int(x) for x in s.split(",")], default=[4, 256, 4, 1024],
                   help="layers,hidden,heads,ffn")
    p.add_argument("--max-steps", type=int, default=1500)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--temperature", type=float, default=2.0)
    p.add_argument("--hard-weight", type=float, default=0.5)
    p.add_argument("--hidden-weight", type=float, default=1.0, help="hidden-state KD weight (0: prediction KD only)")
    p.add_argument("--eval-every", type=int, default=500)
    p.add_argument("--max-train-examples", type=int, default=20000)
    p.add_argument("--max-eval-examples", type=int, default=None)
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--word-embeddings", action=argparse.BooleanOptionalAction, default=True,
                   help="start every student's word table from the teacher's (PCA to the student's width)")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--cache-dir", type=Path, default=None, help="teacher-logit cache (default: tinyplm's)")
    return p.parse_args()


def load_inputs(args):
    """(task data, tokenizer, teacher, encoded train split, encoded eval splits, teacher logits)."""
    from tinyplm.config import TaskSpec
    from tinyplm.distill.cache import cached_teacher_logits, default_cache_dir
    from tinyplm.evaluate.model_eval import encode_evals
    from tinyplm.models import load_classifier
    from tinyplm.models.io import fingerprint
    from tinyplm.run.preflight import load_task
    from tinyplm.tasks.encoding import encode_split

    task = TaskSpec(name=args.task, max_length=args.max_length, max_train_examples=args.max_train_examples,
                    max_eval_examples=args.max_eval_examples, data_dir=args.data_dir)
    data = load_task(task)
    teacher, tok = load_classifier(args.teacher, data.labels, data.is_regression, data.head)
    enc = encode_split(data.train, tok, task.max_length, task.max_train_examples)
    evals = encode_evals(data, tok, task.max_length, task.max_eval_examples)
    logits, _ = cached_teacher_logits(teacher, fingerprint(args.teacher), enc, args.cache_dir or default_cache_dir())
    return data, tok, teacher.eval(), enc, evals, logits


def distil_one(args, arch: str, inputs) -> dict:
    """Build, distil, save, reload and measure one student -> its row."""
    import torch

    from tinyplm.config import TrainSpec
    from tinyplm.config.schema import ObjectiveSpec, ShapeSpec, StudentSpec
    from tinyplm.distill.objective import build_objective
    from tinyplm.evaluate.model_eval import evaluate_model
    from tinyplm.evaluate.size import count_params, disk_bytes
    from tinyplm.models import load_classifier, save_model
    from tinyplm.models.student import build_student
    from tinyplm.train import StageIO, train

    data, tok, teacher, enc, evals, logits = inputs
    layers, hidden, heads, ffn = args.shape
    spec = StudentSpec(shape=ShapeSpec(layers=layers, hidden=hidden, heads=heads, ffn=ffn))
    student = build_student(spec, teacher, seed=args.seed, arch=arch, word_embeddings=args.word_embeddings)
    objective = build_objective(
        ObjectiveSpec(temperature=args.temperature, kd_weight=1.0, hard_weight=args.hard_weight,
                      hidden=args.hidden_weight, layer_map="uniform"),
        student.config, teacher.config, data.is_regression, head=data.head)
    train_spec = TrainSpec(epochs=1000, max_steps=args.max_steps, batch_size=args.batch_size, lr=args.lr,
                           eval_every=args.eval_every, checkpoint_every=0, log_every=100, seed=args.seed,
                           precision="fp32")
    work = args.out / arch
    io = StageIO(arch, work / "checkpoints", work / "train.jsonl", show_progress=False)
    started = time.perf_counter()
    result = train(student, enc, objective, spec=train_spec, io=io, primary=data.primary_metric,
                   evaluate=lambda m: evaluate_model(m, data, evals, bf16=False),
                   teacher_logits=logits, teacher=teacher if objective.needs_teacher else None)
    seconds = time.perf_counter() - started
    model = result.model.eval()
    metrics = evaluate_model(model, data, evals, bf16=False)
    saved = save_model(model, tok, work / "model")
    again, _ = load_classifier(saved, data.labels, data.is_regression, data.head)
    same = _same_logits(model, again, evals)
    total, body = count_params(model)
    return {"arch": arch, "model_type": model.config.model_type, "class": type(model).__name__,
            "metric": metrics[data.primary_metric], "metrics": metrics, "params": total,
            "params_without_embeddings": body, "mb_on_disk": round(disk_bytes(saved) / 1e6, 2),
            "steps": result.steps, "best_step": result.best_step, "train_seconds": round(seconds, 1),
            "reload_identical": same, "saved": str(saved), "torch_threads": torch.get_num_threads()}


def _same_logits(a, b, evals) -> bool:
    """True when two models give the same logits on the first dev examples."""
    import torch

    from tinyplm.models.infer import predict_logits

    enc = next(iter(evals.values()))
    first = enc.subset(range(min(32, len(enc))))
    return bool(torch.allclose(predict_logits(a, first), predict_logits(b, first), atol=1e-5))


def speed(rows: list[dict], evals, labels: tuple[str, ...]) -> None:
    """Batch-1 p50 latency and batch-32 throughput, every saved student timed on the same sentences."""
    from tinyplm.config.schema import MeasureSpec
    from tinyplm.evaluate.speed import measure_speed
    from tinyplm.models import load_classifier

    models = {}
    for row in rows:
        models[row["arch"]] = load_classifier(Path(row["saved"]), labels, False)[0]
    enc = next(iter(evals.values()))
    measured = measure_speed(models, enc, MeasureSpec(latency_sentences=100, throughput_sentences=256, rounds=3,
                                                      warmup=5))
    for row in rows:
        s = measured[row["arch"]]
        row["latency_ms_p50_b1"] = round(s.latency_ms_p50_b1, 2)
        row["throughput_b32"] = round(s.throughput_sent_per_s, 1)


def table(rows: list[dict], metric: str) -> str:
    lines = [f"| arch | class | {metric} | gap to BERT (points) | params (M) | MB | p50 b1 ms | b32 sent/s | "
             "steps | s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['arch']} | {r['class']} | {r['metric']:.4f} | {r.get('gap_points', '')} | "
                     f"{r['params'] / 1e6:.2f} | {r['mb_on_disk']} | {r.get('latency_ms_p50_b1')} | "
                     f"{r.get('throughput_b32')} | {r['steps']} | {r['train_seconds']} |")
    return "\n".join(lines)


def main() -> None:
    args = parse_args()
    import torch

    harness.set_threads(args.threads)
    args.out = args.out / args.task
    inputs = load_inputs(args)
    data = inputs[0]
    rows = []
    for arch in args.archs:
        row = distil_one(args, arch, inputs)
        print(json.dumps({k: row[k] for k in ("arch", "metric", "params", "steps", "train_seconds")}), flush=True)
        rows.append(row)
    speed(rows, inputs[4], data.labels)
    bert = next((r["metric"] for r in rows if r["arch"] == "bert"), None)
    for r in rows:
        r["gap_points"] = round(100 * (r["metric"] - bert), 2) if bert is not None else None
    metric = data.primary_metric
    print(table(rows, metric), flush=True)
    result = {"task": args.task, "metric": metric, "teacher": str(args.teacher), "shape": args.shape,
              "init": "teacher word table (PCA)" if args.word_embeddings else "scratch",
              "objective": {"temperature": args.temperature, "kd_weight": 1.0, "hard_weight": args.hard_weight,
                            "hidden": args.hidden_weight, "layer_map": "uniform"},
              "train": {"max_steps": args.max_steps, "batch_size": args.batch_size, "lr": args.lr,
                        "max_train_examples": args.max_train_examples, "max_length": args.max_length,
                        "seed": args.seed},
              "rows": rows, "python": sys.version.split()[0], "torch": torch.__version__}
    harness.finish(args.out / f"student_families_{args.task}.json", result)


if __name__ == "__main__":
    main()
