"""How fast is ``tinyplm predict --ray`` against plain ``tinyplm predict`` on the same sentences?

    python benchmarks/predict_ray.py runs/sst2_demo/model

The corpus is SST-2 dev (872 sentences) repeated ``--repeat`` times, written once as a whole JSON-lines
file and once cut into ``--shards`` shards. Each round runs, as a user would (one subprocess each,
imports included, length-sorted windows as plain ``predict`` reads them):

- plain: ``tinyplm predict MODEL --input corpus.jsonl --output plain.jsonl`` (one process, every core);
- ray: ``tinyplm predict MODEL --input 'shards/*.jsonl' --ray --workers W --threads T --output ray/``
  (Ray started on this machine for the job, ``W`` actors of ``T`` threads, each loading the model);
  with ``--cluster``, Ray runs as a cluster does, started before the rounds (``ray start --head``)
  and stopped after them, and each round joins it (``--address auto``): Ray's start is then not
  the job's.

Rounds alternate plain and ray; the medians are reported, with Ray's own overhead split out from
its manifest (``start_s``: Ray up, ``predict_s``: the actor pool's work, model loads included).
The labels of the two must be the same, example for example, or the script fails. Ratios:
``end_to_end`` is plain's wall time over ray's (what a user waits for); ``pool`` is the pool's
sentences/s over plain's predicting sentences/s (Ray's cost once it is up).
Needs the cluster extra (``pip install -e .[cluster]``). Prints the JSON; its last line is its path.
"""

from __future__ import annotations

import contextlib
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import _harness as harness

PLAIN_RATE = re.compile(r"\(([\d.]+) s, (\d+) examples/s\)")


def sentences() -> list[str]:
    """The SST-2 dev sentences, read by tinyplm's own task reader (``../shared/data`` or TINYPLM_DATA)."""
    from tinyplm.config.schema import TaskSpec
    from tinyplm.tasks import load_task

    return [e.text for e in load_task(TaskSpec(name="sst2")).evals["dev"].examples]


def write_corpus(texts: list[str], repeat: int, shards: int, out: Path) -> tuple[Path, Path, int]:
    """corpus.jsonl (every sentence, ``repeat`` times) and ``shards`` contiguous shards of it in
    shards/ -> (the whole file, the shard folder, the sentence count)."""
    lines = [json.dumps({"text": t}) for _ in range(repeat) for t in texts]
    whole, folder = out / "corpus.jsonl", out / "shards"
    folder.mkdir(parents=True, exist_ok=True)
    whole.write_text("\n".join(lines) + "\n", encoding="utf-8")
    size = -(-len(lines) // shards)
    for k in range(shards):
        (folder / f"part-{k:02d}.jsonl").write_text("\n".join(lines[k * size:(k + 1) * size]) + "\n", encoding="utf-8")
    return whole, folder, len(lines)


def _tinyplm(args: list[str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tinyplm", *map(str, args)], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"tinyplm {' '.join(map(str, args))} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return wall, done.stderr


def plain_round(model: Path, whole: Path, out: Path) -> dict:
    """One plain ``predict`` -> wall, predicting seconds and sentences/s as it printed them."""
    wall, printed = _tinyplm(["predict", model, "--input", whole, "--output", out])
    found = PLAIN_RATE.search(printed)
    if found is None:
        raise SystemExit(f"plain predict printed no '(S s, N examples/s)':\n{printed[-1000:]}")
    return {"wall_s": wall, "predict_s": float(found.group(1)), "per_s": float(found.group(2))}


def ray_round(model: Path, folder: Path, out: Path, workers: int, threads: int, address: str | None = None) -> dict:
    """One ``predict --ray`` (joining the cluster at ``address``, if given) -> wall, and Ray's start
    (or connection) and pool seconds from its manifest."""
    wall, _ = _tinyplm(["predict", model, "--input", str(folder / "*.jsonl"), "--ray", "--workers", workers,
                        "--threads", threads, "--output", out, *(["--address", address] if address else [])])
    timing = json.loads((out / "_manifest.json").read_text(encoding="utf-8"))["timing"]
    return {"wall_s": wall, "start_s": timing["start_s"], "predict_s": timing["predict_s"]}


def _ray_cli(args: list[str]) -> None:
    ray = Path(sys.executable).with_name("ray")
    done = subprocess.run([str(ray), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"ray {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-2000:]}")


@contextlib.contextmanager
def local_cluster(on: bool):
    """A Ray head on this machine for the rounds (``on``), stopped after them -> its address, or None."""
    if not on:
        yield None
        return
    _ray_cli(["start", "--head", "--include-dashboard=false", "--disable-usage-stats"])
    try:
        yield "auto"
    finally:
        _ray_cli(["stop", "--force"])


def labels(paths: list[Path]) -> list[str]:
    """The predicted labels of JSON-lines outputs, in file order."""
    return [json.loads(line)["label"] for p in paths for line in p.read_text(encoding="utf-8").splitlines() if line]


def _median(rounds: list[dict], key: str) -> float:
    return round(statistics.median(r[key] for r in rounds), 3)


def summary(n: int, plain: list[dict], ray: list[dict], workers: int, threads: int) -> dict:
    """The medians of each side and the two ratios (see the module docstring)."""
    p = {k: _median(plain, k) for k in ("wall_s", "predict_s", "per_s")}
    r = {k: _median(ray, k) for k in ("wall_s", "start_s", "predict_s")}
    r["pool_per_s"] = round(n / r["predict_s"], 1)
    return {"sentences": n, "workers": workers, "threads_per_worker": threads, "rounds": len(plain),
            "plain": p, "ray": r, "ray_overhead_s": round(r["wall_s"] - p["wall_s"], 2),
            "ratio": {"end_to_end": round(p["wall_s"] / r["wall_s"], 3),
                      "pool": round(r["pool_per_s"] / p["per_s"], 3)}}


def main() -> None:
    p = harness.parser(__doc__, out=harness.REPO / "runs" / "predict_ray", fresh=True)
    p.add_argument("model", type=Path, help="a saved model dir (e.g. runs/sst2_demo/model)")
    p.add_argument("--repeat", type=int, default=20, help="copies of SST-2 dev in the corpus (default 20: 17,440)")
    p.add_argument("--shards", type=int, default=8)
    p.add_argument("--workers", type=int, default=2, help="Ray actors")
    p.add_argument("--threads", type=int, default=1, help="threads per Ray actor")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cluster", action="store_true", help="run the ray rounds on a Ray head started before them "
                   "(ray start --head), as on a cluster, rather than starting Ray for each job")
    args = p.parse_args()
    out = harness.prepare_out(args.out, args.fresh)
    whole, folder, n = write_corpus(sentences(), args.repeat, args.shards, out)
    plain, ray = [], []
    with local_cluster(args.cluster) as address:
        for k in range(args.rounds):
            plain.append(plain_round(args.model, whole, out / f"plain-{k}.jsonl"))
            ray.append(ray_round(args.model, folder, out / f"ray-{k}", args.workers, args.threads, address))
    same = labels([out / "plain-0.jsonl"]) == labels(sorted((out / "ray-0").glob("part-*.jsonl")))
    if not same:
        raise SystemExit("predict --ray gave other labels than plain predict on the same sentences")
    result = {"model": str(args.model), "ray_started": "before the rounds" if args.cluster else "by each job",
              **summary(n, plain, ray, args.workers, args.threads),
              "same_labels": same, "plain_rounds": plain, "ray_rounds": ray}
    print(json.dumps(result, indent=1))
    harness.finish(out / "predict_ray.json", result)


if __name__ == "__main__":
    main()
