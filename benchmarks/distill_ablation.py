"""Distillation ablation at equal budget: what each ingredient of TinyBERT/MiniLM buys.

    python benchmarks/distill_ablation.py --task mrpc --budget-minutes 4 --seeds 3

Same teacher (the packaged MiniLM fine-tuned on the task, or --teacher DIR), same 4-layer/312
student (TinyBERT-4 shape), same task-distillation wall-clock budget per variant, cumulative:

  kd           prediction-layer KD only (Hinton soft targets)
  tinybert     + intermediate layers first (embedding, hidden, attention-score MSE)
  minilm       + MiniLMv2 query/key/value self-relations (12 relation heads) on every matched layer
  augment      + TinyBERT data augmentation of the training set
  two-stage    + start from a general-distilled student (corpus, TinyBERT losses + MiniLMv2 relations,
               from the pre-trained MiniLM; its one-time cost is --general-minutes, shared by every
               task and not charged to the task budget); intermediate-stage rate 1e-4, not 5e-4.
               The general student starts (--general-init) from MiniLM's layers 0, 2, 4, 5 narrowed
               to 312 wide (``models.narrow``: the heaviest channels, heads and FFN neurons) or,
               as in TinyBERT, from random weights.

Every other setting is the same for all variants: the intermediate stage takes 60% of the budget
(--intermediate-share; rate 5e-4, random init), the prediction stage the rest (rate 1e-4, best dev
checkpoint kept).

Writes ``<out>/results.json`` in the core's results.json schema (a ``teacher`` stage and one stage
per variant with the seed mean of each metric and ``seed_std``; speed measured on seed 0's model,
all models side by side) and ``<out>/ablation.png``. Its last line of output is the JSON's path.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import _harness as harness

#: The recipes, their variable parts written $name (benchmarks/recipes/distill_ablation.yaml).
RECIPES = harness.recipes("distill_ablation")
SHAPE, GENERAL_LAYERS = RECIPES["shape"], RECIPES["general_layers"]
VARIANTS = tuple(RECIPES["variants"])


def variant_stages(name: str, minutes: float, seed: int, share: float = 0.6) -> list[dict]:
    """The student's stages for one variant: ``share`` of the budget goes to the intermediate stage
    (for every variant that has one), the rest to the prediction layer."""
    stages = RECIPES["variants"][name]
    split = any(s["name"] == "intermediate" for s in stages)
    return harness.fill(stages, seed=seed, intermediate_minutes=minutes * share,
                        prediction_minutes=minutes * (1 - share) if split else minutes)


def base_recipe(args, teacher: str, name: str, out: Path, part: str = "run", **values) -> dict:
    """The recipe ``part`` of the YAML (run, teacher, general, variant) for ``args.task``, named
    ``name``, run in ``out/name``; ``values`` fill its other holes."""
    return harness.fill(RECIPES[part], name=name, output_dir=str(out / name), task=args.task,
                        max_length=args.max_length, teacher=teacher, **values)


def run_recipe(raw: dict):
    """A rerun of the benchmark reuses finished pieces only if they ran this recipe (also through a
    linked _shared); a finished run of another budget, share or teacher is refused by name."""
    return harness.run_recipe(raw, source=f"ablation:{raw['name']}")


def prepare(args, out: Path, shared: Path) -> tuple[str, str | None, str | None]:
    """Teacher dir, MLM dir (for augmentation) and general student dir (or None).

    The MLM head and the general student do not depend on the task: they live in ``shared``
    (``<out>/_shared``) and every task's run reuses them.
    """
    import fcntl

    from tinyplm.models import resolve_model_dir
    from tinyplm.pretrain import fit_mlm_head, read_corpus

    shared.mkdir(parents=True, exist_ok=True)
    mlm = shared / "mlm"
    general = None
    # Two tasks' benchmarks may run at once: the first prepares the shared pieces, the other waits.
    with open(shared / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (mlm / "model.safetensors").is_file():
            fit_mlm_head(resolve_model_dir("minilm-l6"), read_corpus(list(harness.CORPUS), max_docs=20000), mlm,
                         steps=args.mlm_steps)
        if "two-stage" in args.variants:
            general = prepare_general(args, shared)
    teacher = args.teacher
    if teacher is None:
        run_recipe(base_recipe(args, "minilm-l6", "teacher", out, "teacher", minutes=args.teacher_minutes))
        teacher = str(out / "teacher" / "teacher")
    return teacher, str(mlm), general


def prepare_general(args, shared: Path) -> str:
    """The general-distilled student (run once in ``shared``, for every task) -> its model dir."""
    narrowed = args.general_init == "teacher-layers"
    name = "general" if narrowed else "general-random"  # each start is its own reusable run
    # a narrowed copy of the teacher starts near it: a lower rate keeps what it copied
    raw = base_recipe(args, "minilm-l6", name, shared, "general", minutes=args.general_minutes,
                      lr=2e-4 if narrowed else 5e-4, corpus=[str(p) for p in harness.CORPUS])
    if narrowed:  # the copied layers are the ones 'uniform' matches the student's layers with
        raw["students"][0]["teacher_layers"] = GENERAL_LAYERS
    run_recipe(raw)
    return str(shared / name / "students" / "general")


def run_variants(args, out: Path, teacher: str, mlm: str, general: str | None) -> dict[str, list]:
    results: dict[str, list] = {}
    for seed in range(args.seeds):  # seed-major: a slow spell of a shared machine hits every variant
        for variant in args.variants:
            student = {"name": variant,
                       "stages": variant_stages(variant, args.budget_minutes, seed, args.intermediate_share)}
            student.update({"init_from": general} if variant == "two-stage" else {"shape": SHAPE})
            raw = base_recipe(args, teacher, f"{variant}-seed{seed}", out, "variant", student=student, mlm=mlm,
                              copies=args.copies, augment_examples=args.augment_examples)
            record = run_recipe(raw)
            results.setdefault(variant, []).append(record.stage(variant))
            print(json.dumps({"variant": variant, "seed": seed, "metrics": record.stage(variant).metrics}), flush=True)
    return results


def summarise(args, out: Path, teacher: str, results: dict[str, list]):
    """One stage per variant: seed means, seed_std, speed measured side by side with the teacher."""
    from tinyplm.config import TaskSpec
    from tinyplm.report import RunRecord, StageRecord
    from tinyplm.report.info import StageInfo
    from tinyplm.report.run_info import BenchmarkInfo, RunInfo
    from tinyplm.run import bench

    dirs = [Path(teacher)] + [out / f"{v}-seed0" / "students" / v for v in results]
    measured = bench(dirs, TaskSpec(name=args.task, max_length=args.max_length), rounds=3)
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    record = RunRecord(task=measured.task, metric=measured.metric,
                       info=RunInfo(benchmark=BenchmarkInfo(name="distill_ablation", settings=settings)))
    record.stages.append(measured.stages[0])
    for (variant, stages), speed in zip(results.items(), measured.stages[1:], strict=True):
        keys = stages[0].metrics.keys()
        mean = {k: statistics.fmean(s.metrics[k] for s in stages) for k in keys}
        std = {k: statistics.pstdev([s.metrics[k] for s in stages]) for k in keys}
        record.stages.append(StageRecord(
            name=variant, metrics=mean, params=speed.params, params_no_embeddings=speed.params_no_embeddings,
            disk_bytes=speed.disk_bytes, latency_ms_p50_b1=speed.latency_ms_p50_b1,
            latency_ms_p90_b1=speed.latency_ms_p90_b1, throughput_sent_per_s=speed.throughput_sent_per_s,
            throughput_batch=speed.throughput_batch, model_dir=speed.model_dir, kind=speed.kind, shape=speed.shape,
            info=StageInfo(seeds=[s.metrics for s in stages], seed_std=std),
        ))
    return record


def write(record, out: Path) -> Path:
    """``<out>/results.json`` (each stage with its ``seed_std``) and ``<out>/ablation.png``; -> the JSON's path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = record.to_dict()
    for stage in data["stages"]:
        stage["seed_std"] = stage["info"].get("seed_std", {})  # results.json as written, a plain dict
    path = harness.save(out / "results.json", data)
    names = [s.name for s in record.stages]
    values = [s.metrics.get(record.metric, 0.0) for s in record.stages]
    errs = [(s.info.seed_std or {}).get(record.metric, 0.0) for s in record.stages]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(names, values, yerr=errs, capsize=4, color=["#c0392b"] + ["#2a7f62"] * (len(names) - 1))
    ax.set_ylabel(f"{record.task} dev {record.metric}")
    ax.set_title(f"Distillation ablation, {record.task}, equal task budget")
    lo = min(values) - 0.1
    ax.set_ylim(max(0.0, lo), min(1.0, max(values) + 0.05) if max(values) <= 1 else None)
    fig.tight_layout()
    fig.savefig(out / "ablation.png", dpi=120)
    plt.close(fig)
    return path


def main() -> None:
    p = harness.parser(__doc__, out=harness.REPO / "runs" / "ablation", seeds=3, budget_minutes=4.0,
                       budget_help="task-distillation budget per variant", threads=True)
    p.add_argument("--task", required=True,
                   choices=["sst2", "mrpc", "rte", "cola", "stsb", "wnli", "qnli", "mnli", "qqp"])
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    p.add_argument("--teacher", help="a fine-tuned teacher dir (default: fine-tune the packaged MiniLM)")
    p.add_argument("--teacher-minutes", type=float, default=8.0)
    p.add_argument("--general-minutes", type=float, default=20.0, help="one-time general distillation")
    p.add_argument("--general-init", choices=["teacher-layers", "random"], default="teacher-layers",
                   help="the general student's start: MiniLM's layers narrowed to its shape, or random")
    p.add_argument("--mlm-steps", type=int, default=300, help="steps to fit MiniLM's MLM head (augmentation)")
    p.add_argument("--copies", type=int, default=20, help="augmented copies per example")
    p.add_argument("--augment-examples", type=int, default=None, help="augment only the first N examples")
    p.add_argument("--intermediate-share", type=float, default=0.6,
                   help="share of the task budget for the intermediate stage (every variant but kd)")
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--prepare-only", action="store_true",
                   help="only prepare the shared MLM head and general student and the task's teacher, then stop")
    args = p.parse_args()
    if not 0.0 < args.intermediate_share < 1.0:
        p.error(f"--intermediate-share must be between 0 and 1 (exclusive), got {args.intermediate_share}")
    harness.set_threads(args.threads)
    out = harness.prepare_out(args.out / args.task)
    start = time.time()
    teacher, mlm, general = prepare(args, out, args.out / "_shared")
    if args.prepare_only:
        print(json.dumps({"teacher": teacher, "mlm": mlm, "general": general}))
        return
    record = summarise(args, out, teacher, run_variants(args, out, teacher, mlm, general))
    record.info.seconds = round(time.time() - start, 1)
    print(json.dumps({s.name: s.metrics for s in record.stages}), flush=True)
    harness.finish(write(record, out))


if __name__ == "__main__":
    main()
