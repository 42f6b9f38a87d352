"""Do ``tinyplm predict``, ``tinyplm serve`` and ``tinyplm evaluate`` give the same answers, for
every saved stage of a run?

    python benchmarks/serve_agreement.py runs/sst2_demo

For each stage of RUN_DIR/results.json whose model is saved (``model_dir``), on the whole dev split
of the run's task (SST-2 for the demo):

- evaluate: ``tinyplm evaluate``'s code path (encode the split, ``predict_logits`` in batches of 64,
  arg-max);
- predict: ``predict_file`` over the dev file itself, as ``tinyplm predict`` reads it;
- serve: a ``tinyplm serve`` subprocess (dynamic batching, ``--max-batch 32``) on a loopback port,
  every dev sentence sent once from 32 concurrent clients, so batches are formed by arrival.

It reports per stage the examples and the disagreements of predict and serve with evaluate. Stages
whose arithmetic does not depend on the batch should agree on every example; dynamically
quantized ones (activation scales computed per batch) may differ where a logit margin is tiny, so
the stage's runtime and precision are printed beside the counts.
Prints the JSON; its last output line is the JSON's path.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

import _harness as harness
from _serving import Server, drive  # the load benchmark's server wrapper and client


def stage_models(run_dir: Path) -> list[tuple[str, Path, dict]]:
    """(stage name, model dir, its runtime record) for each stage of the run with a saved model."""
    from tinyplm.report import load_record

    record = load_record(run_dir / "results.json")
    out = []
    for stage in record.stages:
        if stage.model_dir and (run_dir / stage.model_dir).is_dir():
            out.append((stage.name, run_dir / stage.model_dir,
                        {"runtime": stage.runtime, "precision": stage.precision}))
    return out


def evaluate_labels(model_dir: Path, split) -> list[int]:
    """Label ids as ``tinyplm evaluate`` computes them."""
    from tinyplm.inference.model_info import model_info
    from tinyplm.models import load_classifier
    from tinyplm.models.infer import logits_to_predictions, predict_logits
    from tinyplm.tasks.encoding import encode_split

    info = model_info(model_dir)
    model, tok = load_classifier(info.path, info.labels, info.is_regression, info.head)
    return [int(p) for p in logits_to_predictions(predict_logits(model, encode_split(split, tok, info.max_length)),
                                                  False)]


def predict_labels(model_dir: Path, split, task: str) -> list[str]:
    """Label names as ``tinyplm predict`` writes them for the dev file itself."""
    from tinyplm.inference.model_info import model_info
    from tinyplm.inference.predictor import Predictor
    from tinyplm.predict.predict import PredictJob, predict_file
    from tinyplm.predict.sources import Source

    info = model_info(model_dir)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "predictions.jsonl"
        predict_file(Predictor.load(model_dir), PredictJob(Source(str(split.source), "tsv", info.head, task=task),
                                                           str(out)))
        return [json.loads(line)["label"] for line in out.read_text(encoding="utf-8").splitlines()]


def serve_labels(model_dir: Path, texts: list[str], max_batch: int, threads: int | None) -> tuple[list, dict]:
    """Label names from a real ``tinyplm serve`` (batched), every text once from 32 clients."""
    args = ["--max-batch", str(max_batch), "--max-wait-ms", "5", "--max-queue", "4096"]
    server = Server(str(model_dir), args + (["--threads", str(threads)] if threads else []))
    try:
        server.wait_ready()
        records = asyncio.run(drive(server.url, texts, len(texts), 32))
    finally:
        stopped = server.stop()
    return [r.label for r in records], {"exit_code": stopped["exit_code"],
                                        "non_2xx": sum(r.status != 200 for r in records)}


def compare(names: list[str], evaluated: list[int], labels: list) -> dict:
    """Disagreements of ``labels`` (names) with ``evaluated`` (ids): count and the first indices."""
    index = {label: i for i, label in enumerate(names)}
    wrong = [i for i, (got, want) in enumerate(zip(labels, evaluated, strict=True)) if index.get(got) != want]
    return {"disagree": len(wrong), "agree_share": round(1 - len(wrong) / len(evaluated), 6), "first": wrong[:10]}


def main() -> None:
    p = harness.parser(__doc__, out="default: RUN_DIR/serve_agreement.json")
    p.add_argument("run_dir", type=Path, help="a finished run (results.json, saved stages)")
    p.add_argument("--max-batch", type=int, default=32, help="the server's dynamic batch limit")
    p.add_argument("--threads", type=int, default=None, help="the servers' torch threads (default: all cores)")
    p.add_argument("--data-dir", default=None, help="data folder (default TINYPLM_DATA or ../shared/data)")
    args = p.parse_args()
    from tinyplm import tasks
    from tinyplm.inference.model_info import model_info
    from tinyplm.report import load_record

    record = load_record(args.run_dir / "results.json")
    split = tasks.get(record.task, args.data_dir).read("dev")
    texts = [ex.text for ex in split.examples]
    result: dict = {"run_dir": str(args.run_dir), "task": record.task, "split": str(split.source),
                    "examples": len(texts), "max_batch": args.max_batch, "stages": {}}
    for name, model_dir, runtime in stage_models(args.run_dir):
        print(f"# {name}: {model_dir}", file=sys.stderr, flush=True)
        labels = model_info(model_dir).labels
        evaluated = evaluate_labels(model_dir, split)
        served, server = serve_labels(model_dir, texts, args.max_batch, args.threads)
        result["stages"][name] = {**runtime, "model_dir": str(model_dir), "server": server,
                                  "predict_vs_evaluate": compare(labels, evaluated, predict_labels(model_dir, split,
                                                                                                   record.task)),
                                  "serve_vs_evaluate": compare(labels, evaluated, served)}
    out = harness.save(args.out or args.run_dir / "serve_agreement.json", result)
    print(json.dumps(result, indent=1))
    harness.finish(out)


if __name__ == "__main__":
    main()
