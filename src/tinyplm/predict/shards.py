"""``tinyplm predict --ray``: many input shards through a pool of Ray actors, one output shard each.

Ray Data holds one row per input shard; ``map_batches`` hands each row to an actor of
:class:`ShardPredictor`, which loads the model once and runs the shard through exactly the code
plain ``predict`` runs (:func:`tinyplm.predict.predict.predict_file`: the same readers, the same
length-sorted windows, the same writers), into its own output shard, written atomically. So every
output shard equals plain ``predict`` on that input shard, record for record, each record carrying
its input line; a shard whose actor dies is run again by a restarted actor (Ray's actor restarts
and task retries), and a half-written shard never appears. ``_manifest.json``, written last, lists
every shard with its counts, and is how a finished job is told from an interrupted one.

The unit of work is a file: a corpus arrives as many files (one big file: split it first). Shards
are read where the actors run, so on a cluster the paths must be on a filesystem every node sees.
"""

from __future__ import annotations

import glob
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tinyplm.cluster import cluster_cpus, connect
from tinyplm.errors import TinyplmError
from tinyplm.files import write_json_atomic

MANIFEST = "_manifest.json"


@dataclass(frozen=True)
class ShardOptions:
    """How each shard is read and predicted: what plain ``predict`` takes, minus its input and output."""

    fmt: str | None = "jsonl"  # None: from the output's suffix (plain predict), jsonl for shards
    input_format: str | None = None
    text_column: str | None = None
    pair_column: str | None = None
    header: bool | None = None
    on_error: str = "raise"
    window: int = 1024
    batch_size: int = 64
    settings: dict[str, Any] = field(default_factory=dict)  # max_length, doc_stride, ... as Predictor.load takes


@dataclass(frozen=True)
class ShardJob:
    """One ``predict --ray`` job: the model, the input shards, the output folder, and the pool."""

    model_dir: Path
    shards: list[Path]
    out_dir: Path
    options: ShardOptions = ShardOptions()
    workers: int = 2
    cpus_per_worker: float | None = 1.0  # None: every CPU of the Ray the job connects to
    address: str | None = None  # an existing Ray cluster; None: Ray on this machine


@dataclass(frozen=True)
class ShardDone:
    """One shard as its actor finished it."""

    shard: str
    output: str
    predicted: int
    skipped: int
    seconds: float
    pid: int


#: Actors of a job on a cluster (``--address``) when ``--workers`` is not given, one thread each.
CLUSTER_WORKERS = 2


def pool_shape(workers: int | None, threads: int | None, address: str | None) -> tuple[int, float | None]:
    """The pool a job asks for -> (actors, threads each), from ``--workers`` and ``--threads`` as
    given (None: not given). With Ray on this machine the default is one actor with every CPU of
    that Ray (threads None: read once Ray is up, :func:`~tinyplm.cluster.cluster_cpus`): each actor
    starts its own process and loads its own model, so two actors of one thread pay that twice and
    predict no faster (docs/results/predict-ray.md). On a cluster the default is
    :data:`CLUSTER_WORKERS` actors of one thread; say more with ``--workers``."""
    if workers is None:
        if address is None:
            return 1, float(threads) if threads else None
        workers = CLUSTER_WORKERS
    return workers, float(threads or 1)


def list_shards(spec: str) -> list[Path]:
    """The input shards ``spec`` names: a folder (its files, not hidden ones, sorted) or a glob
    pattern (its matches, sorted). Raises ``TinyplmError`` when there are none."""
    path = Path(spec)
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith((".", "_")))
    else:
        found = sorted(Path(p) for p in glob.glob(spec) if Path(p).is_file())
    if not found:
        what = "the folder holds no input files" if path.is_dir() else "no file matches it"
        raise TinyplmError(f"--input {spec}: {what} (--ray reads a folder or a glob of shards)")
    return found


def output_of(shard: Path, out_dir: Path, fmt: str) -> Path:
    """The output shard of ``shard``: its name with the output format's suffix, in ``out_dir``."""
    return out_dir / f"{shard.stem}.{fmt}"


def check_shard_job(job: ShardJob) -> None:
    """Raise ``TinyplmError`` before Ray starts: two shards that would write one output, an output
    folder that is a file or is one of the inputs' folder."""
    outs = [output_of(s, job.out_dir, job.options.fmt) for s in job.shards]
    seen: dict[Path, Path] = {}
    for shard, out in zip(job.shards, outs, strict=True):
        if out in seen:
            raise TinyplmError(f"{seen[out]} and {shard} would both write {out}: rename one of them")
        seen[out] = shard
    if job.out_dir.exists() and not job.out_dir.is_dir():
        raise TinyplmError(f"--output {job.out_dir}: with --ray the output is a folder, and this is a file")
    if any(s.resolve().parent == job.out_dir.resolve() for s in job.shards):
        raise TinyplmError(f"--output {job.out_dir}: the output folder holds the input shards; choose another")
    if job.workers < 1 or (job.cpus_per_worker is not None and job.cpus_per_worker <= 0):
        raise TinyplmError(f"--workers {job.workers}, --threads {job.cpus_per_worker}: expected at least 1 "
                           "worker and more than 0 threads (CPUs) each")


#: Input shards up to this many bytes in all are read for bad rows before Ray starts.
SCAN_BYTES = 1 << 30


def check_shard_inputs(job: ShardJob) -> None:
    """Raise ``TinyplmError`` before Ray starts for what each actor would refuse at its first shard:
    a model dir that is not one, a max length it cannot take, a shard format or column options the
    model's head cannot read (``source_for``), an output format it cannot write. Reads configs only."""
    from tinyplm.inference.model_info import model_info, pair_problem
    from tinyplm.predict.predict import check_options, scan_rows, source_for
    from tinyplm.predict.writers import check_output

    o = job.options
    check_options(o.on_error, o.window)
    info = model_info(job.model_dir, **o.settings)
    check_output(o.fmt, info, to_stdout=False)
    sources = [source_for(info, str(shard), o.input_format, o.text_column, o.pair_column, o.header)
               for shard in job.shards]
    if o.pair_column and (problem := pair_problem(info)):
        raise TinyplmError(problem)
    # a bad row in any shard stops the job here, as plain predict stops before a row; past SCAN_BYTES of
    # input the one process reading every shard would hold the pool up: the actors find it (shown unwrapped)
    if o.on_error == "raise" and sum(s.stat().st_size for s in job.shards) <= SCAN_BYTES:
        for source in sources:
            scan_rows(source)


def tinyplm_cause(exc: BaseException) -> TinyplmError | None:
    """The ``TinyplmError`` an actor raised inside the exception Ray gives the driver (a
    ``RayTaskError`` whose ``cause`` chain holds it), or None: shown as plain ``predict`` shows it."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, TinyplmError):
            return e
        todo += [getattr(e, "cause", None), e.__cause__, e.__context__]
    return None


class ShardPredictor:
    """A Ray Data actor: loads the model once, then predicts whole shards (see the module docstring)."""

    def __init__(self, model_dir: str, out_dir: str, options: ShardOptions, threads: int) -> None:
        import torch

        from tinyplm.inference.predictor import Predictor

        torch.set_num_threads(max(1, threads))
        self.predictor = Predictor.load(Path(model_dir), batch_size=options.batch_size, **options.settings)
        self.out_dir, self.options = Path(out_dir), options

    def __call__(self, batch: dict[str, Any]) -> dict[str, list]:
        done = [asdict(self.one(str(shard))) for shard in batch["shard"]]
        return {key: [d[key] for d in done] for key in done[0]} if done else {}

    def one(self, shard: str) -> ShardDone:
        """Predict one shard into its output shard (atomically, as plain ``predict`` writes)."""
        from tinyplm.predict.predict import PredictJob, predict_file, source_for

        o = self.options
        source = source_for(self.predictor.info, shard, o.input_format, o.text_column, o.pair_column, o.header)
        out = output_of(Path(shard), self.out_dir, o.fmt)
        skipped = out.with_name(out.name + ".skipped.jsonl") if o.on_error == "skip" else None
        summary = predict_file(self.predictor, PredictJob(source, str(out), o.fmt, o.on_error, skipped, o.window))
        return ShardDone(shard, str(out), summary.predicted, summary.skipped, round(summary.seconds, 3), os.getpid())


def run_shards(job: ShardJob) -> tuple[list[ShardDone], dict[str, float]]:
    """Run ``job`` on Ray (see the module docstring) -> each shard as finished (input order) and the
    timings: ``start_s`` (Ray up), ``predict_s`` (the pool's work, models loaded in it) and
    ``total_s``. Raises ``TinyplmError`` for a job :func:`check_shard_job` refuses or when Ray is
    missing or cannot be reached; a shard's bad row stops the job as it stops plain ``predict``."""
    check_shard_job(job)
    check_shard_inputs(job)
    t0 = time.perf_counter()
    ray, ours = connect(job.address, "ray.data", "tinyplm predict --ray")
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        return _run(job, ray, t0)
    finally:
        if ours:
            ray.shutdown()  # this process started Ray: stop it, actors included


def _run(job: ShardJob, ray, t0: float) -> tuple[list[ShardDone], dict[str, float]]:
    started = time.perf_counter()
    cpus = job.cpus_per_worker or cluster_cpus(ray)
    job.out_dir.mkdir(parents=True, exist_ok=True)
    (job.out_dir / MANIFEST).unlink(missing_ok=True)  # a manifest says the folder is finished
    ds = ray.data.from_items([{"shard": str(s.resolve())} for s in job.shards], override_num_blocks=len(job.shards))
    ds = ds.map_batches(
        ShardPredictor, batch_size=1, concurrency=job.workers, num_cpus=cpus,
        fn_constructor_kwargs={"model_dir": str(Path(job.model_dir).resolve()), "out_dir": str(job.out_dir.resolve()),
                               "options": job.options, "threads": int(max(1, cpus))},
        max_restarts=-1, max_task_retries=-1)
    try:
        rows = ds.take_all()
    except Exception as exc:  # Ray wraps an actor's error in its own: show ours as plain predict does
        cause = tinyplm_cause(exc)
        if cause is None:
            raise
        raise cause from None
    done_at = time.perf_counter()
    for stale in job.out_dir.glob(".*.*.tmp"):  # a killed actor's half-written shard (atomic_open's .NAME.PID.tmp),
        stale.unlink(missing_ok=True)          # written again whole by the actor that took its shard over
    by_shard = {r["shard"]: ShardDone(**{k: r[k] for k in ShardDone.__dataclass_fields__}) for r in rows}
    done = [by_shard[str(s.resolve())] for s in job.shards]
    timing = {"start_s": round(started - t0, 3), "predict_s": round(done_at - started, 3),
              "total_s": round(done_at - t0, 3)}
    write_json_atomic(job.out_dir / MANIFEST, {"model": str(job.model_dir), "shards": [asdict(d) for d in done],
                                              "timing": timing, "workers": job.workers,
                                              "threads_per_worker": cpus})
    return done, timing
