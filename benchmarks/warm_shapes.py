"""Whether warming every batch shape slows a served model's one-example forward passes, measured.

    python benchmarks/warm_shapes.py runs/sst2_demo/model

A server warms its model on every ``(batch, width)`` it can meet before it says it is ready
(:mod:`tinyplm.serve.warmup`): up to ``--max-batch`` examples, where an unbatched server warms
batch 1 only. Two copies of one model are loaded in this process: one warmed at batch 1 only, one
at every batch up to ``--max-batch``; then ``--sentences`` SST-2 dev sentences are predicted one at
a time on each (``Predictor.predict``, as serve runs a lone request), in ``--rounds`` alternating
rounds. Reports each copy's milliseconds per pass in every round and their medians.
Prints the JSON; its last output line is the JSON's path.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import _harness as harness


def per_pass_ms(predictor, texts: list[str]) -> float:
    """Milliseconds per one-text ``predict`` call over ``texts``."""
    from tinyplm.inference.records import TextInput

    start = time.perf_counter()
    for text in texts:
        predictor.predict([TextInput(text)])
    return (time.perf_counter() - start) / len(texts) * 1000


def main() -> None:
    p = harness.parser(__doc__, out=harness.REPO / "runs" / "warm_shapes")
    p.add_argument("model_dir", help="a model dir or run dir (its model/)")
    p.add_argument("--max-batch", type=int, default=32, help="the batching server's --max-batch")
    p.add_argument("--sentences", type=int, default=400, help="dev sentences per round and copy")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--data-dir", default=None, help="GLUE folder (default TINYPLM_DATA or ../shared/data/glue)")
    args = p.parse_args()

    from tinyplm import tasks
    from tinyplm.inference.predictor import Predictor
    from tinyplm.serve.warmup import warm_shapes

    copies = {"batch_1_only": Predictor.load(Path(args.model_dir)), "every_batch": Predictor.load(Path(args.model_dir))}
    length = copies["batch_1_only"].info.max_length
    shapes = {"batch_1_only": warm_shapes(copies["batch_1_only"].model, 1, length),
              "every_batch": warm_shapes(copies["every_batch"].model, args.max_batch, length)}
    texts = [ex.text for ex in tasks.get("sst2", args.data_dir).read("dev").examples][: args.sentences]
    rounds: dict[str, list[float]] = {name: [] for name in copies}
    for r in range(args.rounds):
        for name in list(copies) if r % 2 == 0 else list(copies)[::-1]:
            rounds[name].append(round(per_pass_ms(copies[name], texts), 3))
    result = {"model_dir": args.model_dir, "runtime_class": type(copies["every_batch"].model).__name__,
              "sentences": len(texts), "shapes_warmed": shapes, "ms_per_pass_rounds": rounds,
              "ms_per_pass_median": {name: statistics.median(v) for name, v in rounds.items()}}
    path = harness.save(harness.prepare_out(args.out) / "warm_shapes.json", result)
    print(json.dumps(result, indent=1))
    harness.finish(path)


if __name__ == "__main__":
    main()
