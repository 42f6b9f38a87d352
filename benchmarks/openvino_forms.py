"""Which OpenVINO form of a run's student: bytes on disk, throughput against the fp32 teacher, agreement.

    python benchmarks/openvino_forms.py runs/sst2_demo

Takes the student stage of a finished run (``--stage``, default the demo's ``student-L3.trim_vocab``:
the PyTorch model its ``runtime`` step starts from) and makes four OpenVINO forms of it, each with
int8 embedding tables, as the demo's ``runtime`` step does:

- ``float``: the graph as converted, run in the plugin's default precision (bf16 where the CPU has
  it), weights stored in float;
- ``nncf_int8``: NNCF post-training int8 MatMuls (300 training examples to calibrate);
- ``int8_weights_per_call``: weight matrices stored in int8, widened by the plugin at every call;
- ``int8_weights`` (``weights: int8``): stored in int8, folded to float once before compiling.

Each is saved as ``tinyplm`` saves a model dir (its bytes on disk) and timed beside the run's fp32
PyTorch teacher and the PyTorch student on SST-2 dev, side by side in this process (batch 32,
length-sorted, ``--rounds`` interleaved rounds, the median; ``tinyplm.evaluate.speed``). Agreement
is with the PyTorch student's predictions on ``--examples`` random *training* sentences; dev
accuracy is printed too, not used to choose anything. Prints the JSON; its last line is its path.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

import _harness as harness

FORMS = ("float", "nncf_int8", "int8_weights_per_call", "int8_weights")


def make_forms(student, train, work: Path, precision: str = "auto") -> dict:
    """The four OpenVINO forms of ``student`` (module docstring), by name, run in ``precision``.
    The two int8-weight forms share one converted graph: only its compiling differs."""
    from tinyplm.compress.openvino import openvino_float, openvino_int8
    from tinyplm.models.openvino import OvClassifier

    folded = openvino_float(student, work / "int8-weights", precision, embeddings=True, weights="int8")
    return {"float": openvino_float(student, work / "float", precision, embeddings=True),
            "nncf_int8": openvino_int8(student, train, work / "nncf", examples=300, precision=precision,
                                       embeddings=True),
            "int8_weights_per_call": OvClassifier(folded.model, student.config, precision, folded.quantization,
                                                  widen=False),
            "int8_weights": folded}


def main() -> Path:
    p = harness.parser(__doc__, out="JSON path (default: RUN/openvino_forms.json)", threads=True)
    p.add_argument("run", type=Path, help="a finished tinyplm run dir (the demo's)")
    p.add_argument("--stage", default="student-L3.trim_vocab", help="the PyTorch student stage")
    p.add_argument("--examples", type=int, default=3000, help="training sentences agreement is counted on")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    harness.set_threads(args.threads)

    from tinyplm.config import load_recipe
    from tinyplm.config.schema import MeasureSpec
    from tinyplm.evaluate.size import disk_bytes
    from tinyplm.evaluate.speed import measure_speed
    from tinyplm.models import load_classifier, save_model
    from tinyplm.models.infer import predict_logits
    from tinyplm.report import RunRecord
    from tinyplm.tasks import load_task
    from tinyplm.tasks.encoding import encode_split

    record = RunRecord.load(args.run / "results.json")
    stage = record.stage(args.stage)
    if stage is None or not stage.model_dir:
        raise SystemExit(f"{args.run / 'results.json'}: no saved stage '{args.stage}'")
    spec = load_recipe(args.run / "config.resolved.yaml").task  # the run's data and max_length
    task = load_task(spec)
    student, tok = load_classifier(args.run / stage.model_dir, task.labels, False)
    teacher, teacher_tok = load_classifier(args.run / "teacher", task.labels, False)
    train = encode_split(task.train, tok, spec.max_length)
    dev = encode_split(task.evals["dev"], tok, spec.max_length)
    teacher_dev = encode_split(task.evals["dev"], teacher_tok, spec.max_length)
    picked = torch.randperm(len(train), generator=torch.Generator().manual_seed(0))[:args.examples].tolist()
    held = train.subset(picked)

    with tempfile.TemporaryDirectory() as tmp:
        forms = make_forms(student, train, Path(tmp))
        sizes = {k: disk_bytes(save_model(m, tok, Path(tmp) / f"saved-{k}")) for k, m in forms.items()}
        reference = predict_logits(student, held).argmax(-1)
        models = {"teacher": teacher, "student": student, **forms}
        speed = measure_speed(models, dev, MeasureSpec(throughput_sentences=len(dev), rounds=args.rounds),
                              per_model={"teacher": teacher_dev})
        rows = {}
        for name, model in models.items():
            row = {"sent_per_s": round(speed[name].throughput_sent_per_s, 1),
                   "x_teacher": round(speed[name].throughput_sent_per_s / speed["teacher"].throughput_sent_per_s, 2),
                   "dev_accuracy": round(float((predict_logits(model, dev if name != "teacher" else teacher_dev)
                                                .argmax(-1) == dev.labels).float().mean()), 4)}
            if name in forms:
                row.update(mb=round(sizes[name] / 1e6, 2), precision=model.precision,
                           agreement=round(float((predict_logits(model, held).argmax(-1) == reference)
                                                 .float().mean()), 5))
            rows[name] = row
    teacher_mb = disk_bytes(args.run / "teacher") / 1e6
    for name in forms:
        rows[name]["x_smaller"] = round(teacher_mb / rows[name]["mb"], 2)
    data = {"benchmark": "openvino_forms", "run": str(args.run), "stage": args.stage,
            "teacher_mb": round(teacher_mb, 1), "agreement_examples": len(held), "rows": rows}
    harness.print_rows([{"form": k, **v} for k, v in rows.items()])
    return harness.finish(args.out or args.run / "openvino_forms.json", data)


if __name__ == "__main__":
    main()
