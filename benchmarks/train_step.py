"""Where a training step's time goes, with PyTorch's default AdamW and with the fused one tinyplm uses.

Each model given is trained for a few steps on real length-grouped SST-2 batches (the training
loop's batching and autocast), once with each optimiser, the two interleaved round by round in one
process; forward, backward (with gradient clipping) and the optimiser step are timed apart. A small
student's word table is most of its weights, and the default AdamW's passes over it were most of its
step. Prints one JSON line per model and optimiser, then the path of the JSON file (its last line).

    python benchmarks/train_step.py runs/sst2_demo/teacher runs/sst2_demo/students/student-L3
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

import _harness as harness

#: The two optimisers compared: PyTorch's default AdamW and the training loop's.
OPTIMISERS = ("default", "fused")


def make_optimiser(kind: str, model: torch.nn.Module, lr: float = 1e-4) -> torch.optim.Optimizer:
    """``kind`` (one of :data:`OPTIMISERS`) over ``model``'s trainable weights, in the loop's groups."""
    from tinyplm.train.optim import adamw, param_groups

    groups = param_groups(model, 0.01)
    return adamw(groups, lr) if kind == "fused" else torch.optim.AdamW(groups, lr=lr)


def time_steps(model: torch.nn.Module, opt: torch.optim.Optimizer, batches: list[dict[str, torch.Tensor]],
               bf16: bool) -> dict[str, float]:
    """Seconds spent in forward, backward (with clipping) and the optimiser step over ``batches``."""
    from tinyplm.models.infer import autocast

    spent = {"forward": 0.0, "backward": 0.0, "optimiser": 0.0}
    params = [p for p in model.parameters() if p.requires_grad]
    model.train()
    for batch in batches:
        t0 = time.perf_counter()
        with autocast(bf16):
            loss = model(**batch).loss
        t1 = time.perf_counter()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        spent["forward"] += t1 - t0
        spent["backward"] += t2 - t1
        spent["optimiser"] += t3 - t2
    return spent


def compare(model: torch.nn.Module, batches: list[dict[str, torch.Tensor]], rounds: int,
            bf16: bool) -> dict[str, dict[str, float]]:
    """Milliseconds per step in each part, for each of :data:`OPTIMISERS`: every round starts from
    the same weights, takes two untimed steps (the optimiser's state is made in the first) and times
    the rest of ``batches``; the optimisers take turns, first one then the other."""
    start = {k: v.clone() for k, v in model.state_dict().items()}
    totals = {kind: {"forward": 0.0, "backward": 0.0, "optimiser": 0.0} for kind in OPTIMISERS}
    for r in range(rounds):
        for kind in (OPTIMISERS if r % 2 == 0 else OPTIMISERS[::-1]):
            model.load_state_dict(start)
            opt = make_optimiser(kind, model)
            time_steps(model, opt, batches[:2], bf16)
            for part, s in time_steps(model, opt, batches[2:], bf16).items():
                totals[kind][part] += s
    model.load_state_dict(start)
    steps = rounds * (len(batches) - 2)
    return {kind: {part: s / steps * 1000 for part, s in parts.items()} for kind, parts in totals.items()}


def main() -> Path:
    p = harness.parser(__doc__, out="JSON path (default: train_step.json)", threads=True)
    p.add_argument("models", type=Path, nargs="+", help="classifier dirs (a run's teacher and students)")
    p.add_argument("--task", default="sst2")
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=20, help="timed steps per optimiser and round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--precision", default="auto", help="training autocast: auto | bf16 | fp32")
    args = p.parse_args()
    harness.set_threads(args.threads)

    import numpy as np

    from tinyplm.config.schema import TaskSpec
    from tinyplm.models import load_classifier
    from tinyplm.models.infer import use_bf16
    from tinyplm.tasks import load_task
    from tinyplm.tasks.encoding import collate, encode_split, model_inputs
    from tinyplm.train.schedule import epoch_batches

    task = load_task(TaskSpec(name=args.task, max_length=args.max_length))
    bf16 = use_bf16(args.precision)
    rows = []
    for model_dir in args.models:
        model, tok = load_classifier(model_dir, task.labels, False, replace_head=True)  # timed training
        train = encode_split(task.train, tok, args.max_length)
        lengths = np.array([len(ids) for ids in train.input_ids])
        order = epoch_batches(len(train), args.batch_size, 0, 0, lengths=lengths)
        batches = [{**model_inputs(b), "labels": b["labels"]}
                   for b in (collate(train, idx) for idx in order[:args.steps + 2])]
        ms = compare(model, batches, args.rounds, bf16)
        steps = args.steps * args.rounds
        words = model.get_input_embeddings().weight.numel()
        for kind in OPTIMISERS:
            rows.append({"model": str(model_dir), "optimiser": kind, "params_m": round(
                sum(q.numel() for q in model.parameters()) / 1e6, 2), "word_table_m": round(words / 1e6, 2),
                **{f"{k}_ms": round(v, 1) for k, v in ms[kind].items()},
                "examples_per_s": round(args.batch_size * 1000 / sum(ms[kind].values()), 1), "steps": steps})
        rows[-1]["x_default"] = round(rows[-1]["examples_per_s"] / rows[-2]["examples_per_s"], 2)
    data = {"benchmark": "train_step", "task": args.task, "batch_size": args.batch_size,
            "bf16": bf16, "steps": args.steps, "rounds": args.rounds, "rows": rows}
    harness.print_rows(rows)
    return harness.finish(args.out or Path("train_step.json"), data)


if __name__ == "__main__":
    main()
