"""Student shapes timed before any training: how fast each could be against the teacher on this CPU.

    python benchmarks/student_shapes.py --task sst2 --shape L3=3,9,512 --shape L2=2,12,384

A shape is ``NAME=LAYERS,HEADS,FFN[,HIDDEN]``: layers, attention heads kept per layer (each of the
teacher's head width, as ``prune_heads`` leaves them), FFN neurons per layer and, optionally, a
narrower hidden width (default the teacher's). Each shape is built in the teacher's family with
random weights (``--teacher``'s config; speed does not depend on what the weights hold), and so is
the teacher; each is run in every runtime of ``--runtimes`` (``openvino``: the float graph in the
plugin's default precision, bf16 where the CPU has it; ``onnx_int8``: ONNX Runtime dynamic int8;
``torch``: fp32 eager) and all are timed side by side on the task's dev sentences as a run measures
its stages (``tinyplm.evaluate.speed``: length-sorted batches of 32, interleaved rounds, the median).

Per shape the JSON gives sentences/s in each runtime, its fastest, that as a multiple of the fp32
teacher and of the teacher on *its* fastest runtime (the two ratios a run's report prints), and,
for the OpenVINO form, the share of inference time per operation type (the plugin's own counters):
what a shape's time goes to (matrix products, attention, normalisation) on this CPU kind, and so
which cut (layers, heads, FFN, width) buys speed here. The accuracy a shape keeps is not measured:
that needs training (a recipe's ``shape:`` and pruning steps). Prints the JSON; its last line is its path.
"""

from __future__ import annotations

import argparse
import collections
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import _harness as harness

RUNTIMES = ("openvino", "onnx_int8", "torch")


@dataclass(frozen=True)
class StudentShape:
    """One shape to time: ``heads`` kept per layer, each of the teacher's head width; ``hidden``
    None keeps the teacher's width."""

    name: str
    layers: int
    heads: int
    ffn: int
    hidden: int | None = None


def parse_shape(text: str) -> StudentShape:
    """``NAME=LAYERS,HEADS,FFN[,HIDDEN]`` -> :class:`StudentShape` (``argparse.ArgumentTypeError``
    naming the expected form otherwise)."""
    name, _, numbers = text.partition("=")
    parts = numbers.split(",")
    if not name or len(parts) not in (3, 4) or not all(p.strip().isdecimal() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(
            f"--shape {text!r}: expected NAME=LAYERS,HEADS,FFN[,HIDDEN] with positive integers, e.g. L3=3,9,512")
    values = [int(p) for p in parts]
    return StudentShape(name, *values)


def build(shape: StudentShape, teacher_cfg, seed: int = 0):
    """A random-weight classifier of ``shape`` in the teacher's family, heads pruned to ``shape.heads``
    (``ValueError`` when the shape asks for more heads than its width holds)."""
    import torch
    from transformers import AutoModelForSequenceClassification

    from tinyplm.config.base import ShapeSpec
    from tinyplm.models import roles
    from tinyplm.models.shape import keep_heads
    from tinyplm.models.student import student_config, teacher_shape

    base = teacher_shape(teacher_cfg)
    width = base.hidden // base.heads
    hidden = shape.hidden or base.hidden
    if hidden % width or shape.heads > hidden // width:
        raise ValueError(f"shape {shape.name}: {shape.heads} heads of width {width} do not fit hidden {hidden} "
                         f"(at most {hidden // width}, and hidden a multiple of {width})")
    cfg = student_config(ShapeSpec(layers=shape.layers, hidden=hidden, heads=hidden // width, ffn=shape.ffn),
                         teacher_cfg)
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_config(cfg).eval()
    if shape.heads < hidden // width:
        for layer in roles.layers(model):
            keep_heads(layer, list(range(shape.heads)), width)
    return model


def forms(model, work: Path, runtimes: list[str]) -> dict:
    """``model`` in each runtime of ``runtimes`` (module docstring), by runtime name."""
    from tinyplm.compress.onnx_quant import dynamic_int8
    from tinyplm.compress.openvino import openvino_float

    for sub in ("ov", "ort"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    made = {"torch": lambda: model, "openvino": lambda: openvino_float(model, work / "ov"),
            "onnx_int8": lambda: dynamic_int8(model, work / "ort")}
    return {r: made[r]() for r in runtimes}


def op_shares(ov_classifier, batches: list[dict]) -> dict[str, float]:
    """Share of OpenVINO inference time per operation type over ``batches`` (the plugin's
    performance counters, on a copy compiled with them on), largest first."""
    import torch

    from tinyplm.models.openvino import compile_config, core

    config = {**compile_config(ov_classifier.precision_asked, torch.get_num_threads()), "PERF_COUNT": "YES"}
    compiled = core().compile_model(ov_classifier.model, "CPU", config)
    names = {n for port in compiled.inputs for n in port.get_names()}
    request, times = compiled.create_infer_request(), collections.Counter()
    for b in batches:
        request.infer({k: v.numpy() for k, v in b.items() if k in names})
        for p in request.profiling_info:
            times[p.node_type] += p.real_time.total_seconds()
    total = sum(times.values()) or 1.0
    return {k: round(v / total, 4) for k, v in times.most_common()}


def main() -> Path:
    p = harness.parser(__doc__, out=Path("runs/student_shapes.json"), threads=True)
    p.add_argument("--task", default="sst2", help="whose dev sentences are timed")
    p.add_argument("--data-dir", default=None, help="GLUE folder (default: ../shared/data/glue)")
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--teacher", default="minilm-l6", help="alias or model dir: its config and tokenizer")
    p.add_argument("--shape", type=parse_shape, action="append", required=True, help="NAME=LAYERS,HEADS,FFN[,HIDDEN]")
    p.add_argument("--runtimes", default="openvino,onnx_int8,torch", help=f"any of {', '.join(RUNTIMES)}")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    runtimes = [r.strip() for r in args.runtimes.split(",") if r.strip()]
    if not runtimes or set(runtimes) - set(RUNTIMES):
        p.error(f"--runtimes {args.runtimes!r}: expected a comma-separated list of {', '.join(RUNTIMES)}")
    names = [s.name for s in args.shape]
    if "teacher" in names or len(set(names)) < len(names):
        p.error(f"--shape names must differ from each other and from 'teacher' (the teacher's own row); got "
                f"{', '.join(names)}")
    harness.set_threads(args.threads)

    from transformers import AutoConfig, AutoTokenizer

    from tinyplm.config import TaskSpec
    from tinyplm.config.schema import MeasureSpec
    from tinyplm.evaluate.cpu_kind import cpu_kind
    from tinyplm.evaluate.speed import _batches, measure_speed
    from tinyplm.models.loading import resolve_model_dir
    from tinyplm.models.student import teacher_shape
    from tinyplm.tasks import load_task
    from tinyplm.tasks.encoding import encode_split

    teacher_dir = resolve_model_dir(args.teacher)
    teacher_cfg = AutoConfig.from_pretrained(teacher_dir)
    t = teacher_shape(teacher_cfg)
    shapes = [StudentShape("teacher", t.layers, t.heads, t.ffn), *args.shape]
    built = {s.name: build(s, teacher_cfg) for s in shapes}  # a shape that does not fit fails before any timing
    task = load_task(TaskSpec(name=args.task, data_dir=args.data_dir, max_length=args.max_length))
    dev = encode_split(task.evals["dev"], AutoTokenizer.from_pretrained(teacher_dir), args.max_length)
    spec = MeasureSpec(throughput_sentences=len(dev), rounds=args.rounds)
    with tempfile.TemporaryDirectory() as tmp:
        models = {(s, r): m for s, model in built.items()
                  for r, m in forms(model, Path(tmp) / s, runtimes).items()}
        speed = measure_speed({f"{s}/{r}": m for (s, r), m in models.items()}, dev, spec)
        batches = _batches(dev, len(dev), spec.throughput_batch, spec.sort_by_length)
        shares = {s: op_shares(models[s, "openvino"], batches) for s in built if "openvino" in runtimes}
    rate = {(s, r): speed[f"{s}/{r}"].throughput_sent_per_s for (s, r) in models}
    teacher_best = max(rate["teacher", r] for r in runtimes)
    rows = []
    for s in shapes:
        best = max(runtimes, key=lambda r: rate[s.name, r])
        rows.append({**asdict(s), "sent_per_s": {r: round(rate[s.name, r], 1) for r in runtimes}, "fastest": best,
                     "x_teacher_fp32": round(rate[s.name, best] / rate["teacher", "torch"], 2)
                     if "torch" in runtimes else None,
                     "x_teacher_best": round(rate[s.name, best] / teacher_best, 2),
                     "openvino_op_shares": shares.get(s.name)})
    harness.print_rows([{k: v for k, v in row.items() if k != "openvino_op_shares"} for row in rows])
    data = {"benchmark": "student_shapes", "cpu": cpu_kind().line(), "task": args.task,
            "sentences": len(dev), "teacher": args.teacher, "rows": rows}
    return harness.finish(args.out, data)


if __name__ == "__main__":
    main()
