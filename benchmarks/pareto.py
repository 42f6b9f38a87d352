"""SST-2 accuracy against throughput, static students to the teacher, beside Model2Vec + LR as the peer.

    nice -n 5 .venv/bin/python benchmarks/pareto.py            # from the repository root

Points: every stage of every run read, named ``run/stage`` (the teacher in fp32 PyTorch, the teacher
on its best runtime, each student and each of its compressed stages: a student's last stage is its
fastest runtime, the earlier ones stay so every family's forms are on the chart). Runs: ``--recipes``
(default sst2_demo, sst2_static: run or reused by ``tinyplm.run.run_or_reuse``), ``--if-finished``
(default sst2_base: read when its run is finished, else skipped, never started), ``--runs`` (finished
run dirs read as they are, whatever recipe made them). The peer: Model2Vec distilled from the
packaged MiniLM (``--peer-model``, ``--peer-pca-dims``) and a scikit-learn logistic regression on the
training sentences. The Pareto front (accuracy and throughput, both up) is over every point.

Protocol, the same for every point, all in this one process: the dev sentences (tinyplm's own
reader; SST-2: 872) sorted by length in words, then characters, in batches of ``--batch`` (32), the
same batches for every model; one call per batch, texts in and labels out, tokenising included
(tinyplm's ``Predictor``, the path of ``tinyplm predict`` and ``serve``; the peer's ``encode`` and
``predict``). An untimed pass warms each model up and gives its dev accuracy; then ``--rounds``
timed rounds, round-robin over the models (the order rotating each round) so machine noise hits all
alike, each passing over the batches until ``--min-round-seconds`` are spent; throughput: the median.

The peer needs ``model2vec[distill]`` (this benchmark's extra, never tinyplm's; installed with this
environment's transformers and tokenizers pinned): without it, exit 2 naming the pip command, unless ``--no-peer``.

Writes under ``--out``: ``pareto.json`` (each point's name, run, stage, family, kind, runtime,
accuracy, sent/s, size on disk, on_front; the front; the checks), ``pareto.md`` (the table) and
``pareto.png`` (accuracy against sent/s, log x; the front a step line, dominated points grey, the
peer a diamond). Prints a JSON line per point, the table, each ``--check`` (the best tinyplm
accuracy at or above a throughput against a target), the peer's figures; last, the JSON's path.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import _harness as harness

if TYPE_CHECKING:
    from tinyplm.config.schema import RunConfig
    from tinyplm.report import RunRecord

RECIPES = (harness.REPO / "recipes" / "glue" / "sst2_demo.yaml", harness.REPO / "recipes" / "glue" / "sst2_static.yaml")
IF_FINISHED = (harness.REPO / "recipes" / "glue" / "sst2_base.yaml",)
CHECKS = ("8600:0.82", "4000:0.85")
PEER = "Model2Vec + LR (peer)"


@dataclass(frozen=True)
class Run:
    """A finished run read for its stages: its recipe, its dir, its record."""

    cfg: RunConfig
    run_dir: Path
    record: RunRecord


@dataclass
class Point:
    """One model on the chart: what it is (``kind``: teacher, student, compressed or peer;
    ``recorded_accuracy``: its run's own dev figure, for reference) and, once measured, its dev
    ``accuracy``, ``sent_per_s`` and whether it is ``on_front``."""

    name: str
    run: str
    stage: str
    family: str
    kind: str
    runtime: str
    disk_bytes: int
    recorded_accuracy: float | None = None
    accuracy: float = 0.0
    sent_per_s: float = 0.0
    on_front: bool = False
    disk_mb: float = field(init=False)

    def __post_init__(self) -> None:
        self.disk_mb = round(self.disk_bytes / 1e6, 3)


@dataclass(frozen=True)
class Contender:
    """A model ready to be timed: its ``point`` (not yet measured) and ``predict``, texts -> label names."""

    point: Point
    predict: Callable[[list[str]], list[str]]


@dataclass(frozen=True)
class Check:
    """The best tinyplm accuracy among points at or above ``min_sent_per_s``, against ``target``."""

    min_sent_per_s: float
    target: float
    best: Point | None

    @property
    def met(self) -> bool:
        return self.best is not None and self.best.accuracy >= self.target

    def line(self) -> str:
        best = self.best
        found = f"best accuracy {best.accuracy:.4f} ({best.name}, {best.sent_per_s:,.0f} sent/s)" if best else "none"
        return (f"check: tinyplm at >= {self.min_sent_per_s:,.0f} sent/s: {found}; target {self.target:.2f} "
                + ("met" if self.met else "not met"))


# --------------------------------------------------------------------------- the front


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the (accuracy, throughput) points no other point dominates (at least as good on
    both, better on one), in throughput order; equal points are all kept."""
    def dominated(a: tuple[float, float]) -> bool:
        return any(b[0] >= a[0] and b[1] >= a[1] and b != a for b in points)

    return sorted((i for i, p in enumerate(points) if not dominated(p)), key=lambda i: (points[i][1], -points[i][0]))


def mark_front(points: list[Point]) -> list[Point]:
    """Set ``on_front`` on ``points``; -> the front's points in throughput order."""
    front = pareto_front([(p.accuracy, p.sent_per_s) for p in points])
    for i, p in enumerate(points):
        p.on_front = i in front
    return [points[i] for i in front]


def checks(points: list[Point], specs: Sequence[str]) -> list[Check]:
    """One :class:`Check` per ``RATE:ACCURACY`` spec, over the tinyplm points (not the peer)."""
    out = []
    for spec in specs:
        rate, target = (float(x) for x in spec.split(":"))
        fast = [p for p in points if p.kind != "peer" and p.sent_per_s >= rate]
        out.append(Check(rate, target, max(fast, key=lambda p: (p.accuracy, p.sent_per_s), default=None)))
    return out


# --------------------------------------------------------------------------- the models and their timing


def family_of(model_dir: Path) -> str:
    """A saved model's family: a classic student's ``arch``, else config.json's ``model_type``."""
    config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    return config.get("arch", "?") if config.get("model_type") == "tinyplm_family" else config.get("model_type", "?")


def read_runs(recipes: Sequence[Path], if_finished: Sequence[Path], run_dirs: Sequence[Path] = ()
              ) -> tuple[list[Run], list[dict]]:
    """Each finished run dir of ``run_dirs`` as it is, the run of each recipe (run or reused) and of
    each finished ``if_finished`` one; -> those and the ``if_finished`` recipes skipped, each with why."""
    from tinyplm.config import load_recipe
    from tinyplm.errors import RunDirError
    from tinyplm.report import RunRecord
    from tinyplm.run import run_dir_of, run_or_reuse

    runs, skipped = [], []
    for d in map(Path, run_dirs):
        cfg = load_recipe(d / "config.resolved.yaml")
        runs.append(Run(cfg, d, RunRecord.load(d / "results.json")))
    for path, optional in [(p, False) for p in recipes] + [(p, True) for p in if_finished]:
        cfg = load_recipe(path)
        run_dir = run_dir_of(cfg)
        finished = (run_dir / "results.json").is_file()
        try:
            if optional and not finished:
                raise RunDirError(f"no finished run in {run_dir}")
            if not finished:
                print(f"pareto: running {path} (no finished run in {run_dir})", file=sys.stderr, flush=True)
            runs.append(Run(cfg, run_dir, run_or_reuse(cfg)))
        except RunDirError as e:  # a finished run of another recipe (or none, for an optional one)
            why = f"{e}" + (f" (to read it as it is: --runs {run_dir})" if finished else "")
            if not optional:
                raise SystemExit(f"pareto: {path}: {why}") from None
            skipped.append({"recipe": str(path), "why": why})
            print(f"pareto: skipped {path}: {why}", file=sys.stderr, flush=True)
    return runs, skipped


def run_contenders(run: Run, batch: int) -> list[Contender]:
    """Every stage of a run, loaded by tinyplm's Predictor."""
    from tinyplm.inference.predictor import Predictor
    from tinyplm.inference.records import TextInput

    out = []
    for s in run.record.stages:
        folder = run.run_dir / s.model_dir
        predictor = Predictor.load(folder, batch_size=batch)

        def predict(texts: list[str], predictor=predictor) -> list[str]:
            return [p.label for p in predictor.predict([TextInput(t) for t in texts])]

        recorded = s.metrics.get(run.record.metric)
        out.append(Contender(Point(f"{run.cfg.name}/{s.name}", run.cfg.name, s.name, family_of(folder), str(s.kind),
                                   f"{s.runtime} {s.precision}", s.disk_bytes,
                                   None if recorded is None else round(recorded, 4)), predict))
    return out


def peer_available() -> bool:
    """Whether Model2Vec's distillation can be imported (``model2vec`` with its ``distill`` extra)."""
    try:
        import model2vec.distill  # noqa: F401
    except ImportError:
        return False
    return True


def peer_install() -> str:
    """The pip command installing the peer's packages, this environment's transformers and tokenizers pinned."""
    from importlib.metadata import version

    pins = " ".join(f"{name}=={version(name)}" for name in ("transformers", "tokenizers"))
    return f'{Path(sys.executable).parent / "pip"} install "model2vec[distill]" {pins}'


def build_peer(data, model: str, pca_dims: int, folder: Path) -> Contender:
    """Model2Vec distilled from ``model`` (a tinyplm alias or dir), PCA to ``pca_dims``, and a
    logistic regression on its embeddings of ``data``'s training sentences; both saved in ``folder``
    (their size is the peer's MB on disk)."""
    import numpy as np
    from model2vec.distill import distill
    from safetensors.numpy import save_file
    from sklearn.linear_model import LogisticRegression

    from tinyplm.evaluate.size import disk_bytes
    from tinyplm.models import resolve_model_dir

    static = distill(model_name=str(resolve_model_dir(model)), pca_dims=pca_dims)
    train = data.train.examples
    clf = LogisticRegression(max_iter=2000).fit(static.encode([e.text for e in train]), [e.label for e in train])
    static.save_pretrained(str(folder))
    save_file({"coef": clf.coef_.astype(np.float32), "intercept": clf.intercept_.astype(np.float32)},
              str(folder / "logistic_regression.safetensors"))

    def predict(texts: list[str]) -> list[str]:
        return [data.labels[int(c)] for c in clf.predict(static.encode(texts))]

    return Contender(Point(PEER, "peer", "model2vec-lr", "model2vec", "peer", "numpy", disk_bytes(folder)), predict)


def dev_batches(examples, labels: Sequence[str], batch: int) -> tuple[list[list[str]], list[str]]:
    """The dev texts sorted by length in words, then characters, cut into batches of ``batch``;
    -> (the batches, the gold label names in the same order)."""
    order = sorted(range(len(examples)), key=lambda i: (len(examples[i].text.split()), len(examples[i].text), i))
    texts = [examples[i].text for i in order]
    return [texts[i:i + batch] for i in range(0, len(texts), batch)], [labels[examples[i].label] for i in order]


def _timed_pass(contender: Contender, batches: list[list[str]]) -> tuple[float, list[str]]:
    got: list[str] = []
    t0 = time.perf_counter()
    for texts in batches:
        got += contender.predict(texts)
    return time.perf_counter() - t0, got


def _rate(contender: Contender, batches: list[list[str]], sentences: int, min_seconds: float) -> float:
    """Sentences/s of one timed round: passes over ``batches`` until ``min_seconds`` are spent (one at least)."""
    done, spent = 0, 0.0
    while done == 0 or spent < min_seconds:
        spent += _timed_pass(contender, batches)[0]
        done += sentences
    return done / spent


def measure(contenders: list[Contender], batches: list[list[str]], gold: list[str], rounds: int,
            min_seconds: float = 0.0) -> list[Point]:
    """Each contender's dev accuracy (its untimed warm-up pass) and median sentences/s over
    ``rounds`` interleaved timed rounds of at least ``min_seconds`` each (see the module docstring)."""
    accuracy = []
    for c in contenders:
        got = _timed_pass(c, batches)[1]
        accuracy.append(sum(g == y for g, y in zip(got, gold, strict=True)) / len(gold))
    rates: list[list[float]] = [[] for _ in contenders]
    for r in range(rounds):
        for i in [*range(r % len(contenders), len(contenders)), *range(r % len(contenders))]:
            rates[i].append(_rate(contenders[i], batches, len(gold), min_seconds))
    return [replace(c.point, accuracy=round(a, 4), sent_per_s=round(statistics.median(t), 1))
            for c, a, t in zip(contenders, accuracy, rates, strict=True)]


# --------------------------------------------------------------------------- output


def table(points: list[Point]) -> str:
    """The points as a markdown table, fastest first."""
    lines = ["| point | family | kind | runtime | accuracy | sent/s | MB | front |", "|" + "---|" * 8]
    for p in sorted(points, key=lambda p: -p.sent_per_s):
        lines.append(f"| {p.name} | {p.family} | {p.kind} | {p.runtime} | {p.accuracy:.4f} | {p.sent_per_s:,.0f} "
                     f"| {p.disk_mb:.1f} | {'yes' if p.on_front else ''} |")
    return "\n".join(lines) + "\n"


def plot(points: list[Point], path: Path, task: str, batch: int, found: list[Check]) -> Path:
    """Accuracy against sentences/s (log x): the front a step line, its points labelled, dominated
    points grey, the peer a diamond, each check's throughput a dotted line."""
    from matplotlib.ticker import FuncFormatter

    from tinyplm.report.plots import BEST_COLOR, TEACHER_COLOR, new_figure, save_figure

    fig, ax = new_figure(9.0, 5.6)
    front = sorted((p for p in points if p.on_front), key=lambda p: p.sent_per_s)
    ax.step([p.sent_per_s for p in front], [p.accuracy for p in front], where="pre", color=BEST_COLOR, lw=1.4,
            label="Pareto front", zorder=2)
    for p in points:
        peer = p.kind == "peer"
        color = TEACHER_COLOR if peer else (BEST_COLOR if p.on_front else "0.7")
        ax.scatter(p.sent_per_s, p.accuracy, marker="D" if peer else ("s" if p.family.startswith("static") else "o"),
                   s=60 if peer or p.on_front else 30, color=color, edgecolor="white", linewidth=0.6, zorder=3)
        if peer or p.on_front:
            ax.annotate(p.name, (p.sent_per_s, p.accuracy), xytext=(5, 4), textcoords="offset points", fontsize=7.5,
                        color="0.15")
    right, low = max(p.sent_per_s for p in points) * 1.5, min(p.accuracy for p in points)
    for c in (c for c in found if c.min_sent_per_s < right):  # a check's corner: the points right of and above it
        ax.plot([c.min_sent_per_s, c.min_sent_per_s, right], [low, c.target, c.target], linestyle=":", color="0.5",
                lw=1, zorder=1)
        ax.text(c.min_sent_per_s, c.target, f" >= {c.min_sent_per_s:,.0f}/s, {c.target:.2f}", fontsize=7,
                color="0.4", va="bottom", clip_on=True)
    ax.scatter([], [], marker="o", color="0.7", label="dominated")
    ax.scatter([], [], marker="D", color=TEACHER_COLOR, label=PEER)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_xlabel(f"throughput, batch {batch}, text to label (sentences/s, log scale)")
    ax.set_ylabel(f"{task} dev accuracy")
    ax.set_title(f"{task}: accuracy against throughput (squares: static students)", loc="left", fontsize=11)
    ax.legend(loc="best", fontsize=8, frameon=False)
    return save_figure(fig, path)


def parse(argv: Sequence[str] | None = None):
    p = harness.parser(__doc__, out=harness.REPO / "runs" / "pareto_sst2", fresh=True, threads=True)
    p.add_argument("--recipes", type=Path, nargs="*", default=list(RECIPES),
                   help="recipes whose runs are read, run first when not finished (default: sst2_demo, sst2_static)")
    p.add_argument("--if-finished", type=Path, nargs="*", default=list(IF_FINISHED),
                   help="recipes read only when their run is finished, never run here (default: sst2_base)")
    p.add_argument("--runs", type=Path, nargs="*", default=[],
                   help="finished run dirs read as they are, whatever recipe made them (default: none)")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds per model (median; default 5)")
    p.add_argument("--min-round-seconds", type=float, default=1.0, help="repeat a round's pass until this long (s)")
    p.add_argument("--batch", type=int, default=32, help="sentences per call (default 32)")
    p.add_argument("--check", action="append", default=None, metavar="RATE:ACCURACY",
                   help=f"best tinyplm accuracy at >= RATE sent/s vs ACCURACY (repeatable; default {' '.join(CHECKS)})")
    p.add_argument("--no-peer", action="store_true", help="leave out the Model2Vec + LR peer (without this flag "
                   "and without model2vec[distill] installed: exit 2, naming the pip command that installs it)")
    p.add_argument("--peer-model", default="minilm-l6", help="what Model2Vec distils (default: the packaged MiniLM)")
    p.add_argument("--peer-pca-dims", type=int, default=256, help="Model2Vec's PCA dimensions (default 256)")
    args = p.parse_args(argv)
    args.check = args.check or list(CHECKS)
    if not args.no_peer and not peer_available():
        p.error(f"the Model2Vec peer needs model2vec[distill], an extra of this benchmark only: {peer_install()} "
                "(or pass --no-peer to measure without it)")
    return args


def main(argv: Sequence[str] | None = None) -> Path:
    args = parse(argv)
    harness.set_threads(args.threads)
    out = harness.prepare_out(args.out, args.fresh)
    import torch

    from tinyplm.config.schema import TaskSpec
    from tinyplm.tasks import load_task

    runs, skipped = read_runs(args.recipes, args.if_finished, args.runs)
    if not runs:
        raise SystemExit("pareto: no run to read (give --recipes or --runs)")
    data = load_task(TaskSpec(name=runs[0].cfg.task.name, data_dir=runs[0].cfg.task.data_dir))
    if wrong := [r.cfg.name for r in runs if r.record.task != data.task]:
        raise SystemExit(f"pareto: runs {', '.join(wrong)} are not on {data.task}")
    contenders = [c for r in runs for c in run_contenders(r, args.batch)]
    if not args.no_peer:
        peer_dir = harness.prepare_out(out / "peer", fresh=True)
        contenders.append(build_peer(data, args.peer_model, args.peer_pca_dims, peer_dir))
    batches, gold = dev_batches(data.evals["dev"].examples, data.labels, args.batch)
    points = measure(contenders, batches, gold, args.rounds, args.min_round_seconds)
    front, found = mark_front(points), checks(points, args.check)
    plot(points, out / "pareto.png", data.task, args.batch, found)
    (out / "pareto.md").write_text(table(points), encoding="utf-8")
    peer = next((p for p in points if p.kind == "peer"), None)
    result = {"task": data.task, "dev_sentences": len(gold), "batch": args.batch, "rounds": args.rounds,
              "threads": torch.get_num_threads(), "runs": {r.cfg.name: str(r.run_dir) for r in runs},
              "skipped": skipped, "points": [asdict(p) for p in points], "front": [p.name for p in front],
              "checks": [{**asdict(c), "met": c.met} for c in found], "peer": None if peer is None else asdict(peer),
              "table": str(out / "pareto.md"), "plot": str(out / "pareto.png")}
    harness.print_rows(result["points"])
    print(table(points))
    for c in found:
        print(c.line())
    print(f"peer: {PEER} accuracy {peer.accuracy:.4f} at {peer.sent_per_s:,.0f} sent/s" if peer else "peer: left out")
    return harness.finish(out / "pareto.json", result)


if __name__ == "__main__":
    main()
