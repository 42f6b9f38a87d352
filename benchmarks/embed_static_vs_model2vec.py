"""An embedding run's static sentence students beside Model2Vec distilled from the same teacher, and the teacher.

    .venv/bin/python benchmarks/embed_static_vs_model2vec.py runs/minilm_embed
    .venv/bin/python benchmarks/embed_static_vs_model2vec.py runs/minilm_embed --threads 2 --rounds 5

Models: the run's teacher (``RUN_DIR/teacher``), every static sentence student the run saved
(``RUN_DIR/students/<name>/`` whose config.json names ``tinyplm_static_sentence``; not the
``.stage-<k>`` copies), and Model2Vec's static model made from the same teacher dir by
``model2vec.distill.distill(<teacher dir>, pca_dims=--pca-dims)`` (saved beside ``--out``).

Protocol, all in this one process:

* quality: each model's ``embed`` scored by :mod:`tinyplm.evaluate.embed_suite` (the code of
  ``tinyplm embed-eval``): STS-B dev Spearman x 100 of the pairs' cosines, SQuAD v1.1 dev as
  retrieval (each question ranks every paragraph), nDCG@10 x 100 and MRR@10. tinyplm's models
  embed through :func:`tinyplm.models.embedder.load_embedder` (each at its own length limit: the
  teacher's ``max_seq_length``, none for a static table), Model2Vec through ``StaticModel.encode``
  (its default limit). This pass also warms every model up.
* throughput: the same ``--throughput-sentences`` sentences (STS-B dev's, repeated if there are
  fewer) in calls of ``--batch-size``, texts in and vectors out, tokenisation included; ``--rounds``
  timed rounds, round-robin over the models with the order rotating each round, so machine noise
  hits all alike; sentences/s: the median round.

The JSON records the CPU (its model name, and its kind: the strongest of ``amx_tile``,
``avx512_vnni``, ``avx2`` in /proc/cpuinfo's flags) and torch's threads. Prints the JSON; the last
line is its path.

Model2Vec is this benchmark's extra, never a tinyplm dependency (``pip install -e '.[benchmark]'``):
without it the script exits 2 naming the pip command.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import cycle, islice
from pathlib import Path

import numpy as np

import _harness as harness

#: The CPU feature flags that name its kind, strongest first (int8 and bf16 matrix units, then vectors).
CPU_KINDS = (("amx", "amx_tile"), ("avx512_vnni", "avx512_vnni"), ("avx2", "avx2"))
PEER = "model2vec"


@dataclass(frozen=True)
class Contender:
    """One model measured: its ``name``, ``kind`` (teacher, student, peer), ``path``, vector ``dim``
    and ``embed(texts) -> (len(texts), dim)`` float32."""

    name: str
    kind: str
    path: Path
    dim: int
    embed: Callable[[Sequence[str]], np.ndarray]


def cpu_kind(flags: frozenset[str]) -> str:
    """The strongest of :data:`CPU_KINDS` that ``flags`` hold, else ``other``."""
    return next((kind for kind, flag in CPU_KINDS if flag in flags), "other")


def cpu_record() -> dict:
    """The CPU's model name, kind and the flags of :data:`CPU_KINDS` it has (from /proc/cpuinfo)."""
    from tinyplm.models.int8_cpu import cpu_flags

    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    name = next((line.partition(":")[2].strip() for line in text.splitlines() if line.startswith("model name")), "")
    flags = cpu_flags(text)
    return {"model": name, "kind": cpu_kind(flags), "flags": [f for _, f in CPU_KINDS if f in flags],
            "cores": os.cpu_count()}


def static_students(run_dir: Path) -> list[Path]:
    """The static sentence students a run saved (``students/<name>/``, by name; no stage copies)."""
    from tinyplm.models.classic.static_sentence import is_static_sentence_dir

    folder = run_dir / "students"
    found = [p for p in sorted(folder.iterdir()) if p.is_dir() and ".stage-" not in p.name] if folder.is_dir() else []
    return [p for p in found if is_static_sentence_dir(p)]


def tinyplm_contender(name: str, kind: str, path: Path, batch_size: int) -> Contender:
    from tinyplm.models.embedder import load_embedder

    embedder = load_embedder(path, batch_size=batch_size)
    return Contender(name, kind, path, embedder.dim, embedder.embed)


def peer_available() -> bool:
    """Whether Model2Vec's distillation can be imported (``model2vec`` with its ``distill`` extra)."""
    try:
        import model2vec.distill  # noqa: F401
    except ImportError:
        return False
    return True


def peer_install() -> str:
    """The pip command installing the peer, this environment's torch, transformers and tokenizers pinned."""
    from importlib.metadata import version

    pins = " ".join(f"{name}=={version(name)}" for name in ("torch", "transformers", "tokenizers"))
    return f'{Path(sys.executable).parent / "pip"} install "model2vec[distill]" {pins}'


def model2vec_contender(teacher_dir: Path, pca_dims: int, folder: Path, batch_size: int) -> Contender:
    """Model2Vec distilled from ``teacher_dir`` (PCA to ``pca_dims``), saved in ``folder``."""
    from model2vec.distill import distill

    static = distill(model_name=str(teacher_dir), pca_dims=pca_dims)
    static.save_pretrained(str(folder))

    def embed(texts: Sequence[str]) -> np.ndarray:
        return np.asarray(static.encode(list(texts), batch_size=batch_size, show_progress_bar=False),
                          dtype=np.float32)

    return Contender(PEER, "peer", folder, int(static.dim), embed)


def quality(contender: Contender, sets: list) -> dict:
    """The contender's scores on each set (``tinyplm embed-eval``'s code), by set name."""
    from tinyplm.evaluate.embed_suite import score_sets

    return {s.name: {**s.metrics, **s.size, "seconds": s.seconds} for s in score_sets(contender.embed, sets)}


def _rate(contender: Contender, batches: list[list[str]]) -> float:
    """Sentences/s of one timed pass over ``batches``."""
    start = time.perf_counter()
    for texts in batches:
        contender.embed(texts)
    return sum(map(len, batches)) / (time.perf_counter() - start)


def throughput(contenders: list[Contender], batches: list[list[str]], rounds: int) -> list[list[float]]:
    """Each contender's sentences/s in ``rounds`` interleaved rounds (the order rotating each round)."""
    rates: list[list[float]] = [[] for _ in contenders]
    n = len(contenders)
    for r in range(rounds):
        for i in [*range(r % n, n), *range(r % n)]:
            rates[i].append(round(_rate(contenders[i], batches), 1))
    return rates


def parse(argv: Sequence[str] | None = None):
    p = harness.parser(__doc__, out="default: RUN_DIR/embed_static_vs_model2vec.json", threads=True)
    p.add_argument("run_dir", type=Path, help="a finished embedding run (its teacher/ and students/)")
    p.add_argument("--data-dir", type=Path, default=None, help="data root (default: tinyplm's, ../shared/data)")
    p.add_argument("--pca-dims", type=int, default=256, help="Model2Vec's PCA dimensions (default 256)")
    p.add_argument("--batch-size", type=int, default=64, help="sentences per call (default 64)")
    p.add_argument("--throughput-sentences", type=int, default=2000, help="sentences per timed round (default 2000)")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds per model (median; default 5)")
    args = p.parse_args(argv)
    if not peer_available():
        p.error(f"Model2Vec is this benchmark's extra: {peer_install()} (or pip install -e '.[benchmark]')")
    if not (args.run_dir / "teacher").is_dir():
        p.error(f"{args.run_dir}: no teacher/ folder (a finished embedding run's dir)")
    args.out = args.out or args.run_dir / "embed_static_vs_model2vec.json"
    return args


def main(argv: Sequence[str] | None = None) -> Path:
    args = parse(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    harness.set_threads(args.threads)
    import torch

    from tinyplm.evaluate.embed_suite import read_sets, standard_sets
    from tinyplm.evaluate.size import disk_bytes

    sets = read_sets(standard_sets(args.data_dir, True, True))
    stsb = next(s for s in sets if s.request.name == "stsb").data
    sentences = list(dict.fromkeys(t for pair in zip(stsb.texts_a, stsb.texts_b, strict=True) for t in pair))
    texts = list(islice(cycle(sentences), args.throughput_sentences))
    batches = [texts[i:i + args.batch_size] for i in range(0, len(texts), args.batch_size)]
    teacher_dir = args.run_dir / "teacher"
    contenders = [tinyplm_contender("teacher", "teacher", teacher_dir, args.batch_size)]
    contenders += [tinyplm_contender(p.name, "student", p, args.batch_size) for p in static_students(args.run_dir)]
    peer_dir = harness.prepare_out(args.out.parent / f"{args.out.stem}.model2vec", fresh=True)
    contenders.append(model2vec_contender(teacher_dir, args.pca_dims, peer_dir, args.batch_size))
    scores = [quality(c, sets) for c in contenders]
    rates = throughput(contenders, batches, args.rounds)
    models = [{"name": c.name, "kind": c.kind, "path": str(c.path), "dim": c.dim,
               "disk_mb": round(disk_bytes(c.path) / 1e6, 2), **score,
               "sentences_per_s": round(statistics.median(r), 1), "rounds_sentences_per_s": r}
              for c, score, r in zip(contenders, scores, rates, strict=True)]
    result = {"run_dir": str(args.run_dir), "teacher": str(teacher_dir), "pca_dims": args.pca_dims,
              "batch_size": args.batch_size, "throughput_sentences": len(texts), "rounds": args.rounds,
              "threads": torch.get_num_threads(), "cpu": cpu_record(), "models": models}
    print(json.dumps(result, indent=1))
    return harness.finish(args.out, result)


if __name__ == "__main__":
    main()
