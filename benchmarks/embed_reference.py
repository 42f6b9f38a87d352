"""A sentence-transformers model scored by tinyplm's embedding metrics on STS-B dev and SQuAD dev retrieval -> JSON.

    .venv/bin/python benchmarks/embed_reference.py                       # the packaged MiniLM (minilm-l6)
    .venv/bin/python benchmarks/embed_reference.py --model path/to/st-model --threads 2

The ``embed`` callable is ``SentenceTransformer(model).encode`` (the model's own modules: pooling,
and normalisation where the model has it), so the figures can be set beside the ones published
for the model, as a check of :mod:`tinyplm.evaluate.embedding` and :mod:`tinyplm.tasks.retrieval`:

* ``stsb``: Spearman and Pearson (x 100) of the cosine of each GLUE STS-B dev pair against its score;
* ``squad``: SQuAD v1.1 dev as retrieval, each question ranking all paragraphs (its own is the one
  relevant): nDCG@10, MRR@10, recall@1 and recall@10 (x 100).

Each part reports the seconds spent embedding and scoring. Prints the JSON; its last output line
is the JSON's path.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

import _harness as harness


def encoder(model_dir: Path, batch_size: int, device: str | None):
    """The ``embed`` callable of a sentence-transformers model dir (offline, no remote code)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device=device)

    def embed(texts) -> np.ndarray:
        return model.encode(list(texts), batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)

    return embed


def timed(fn, *args, **kwargs) -> tuple[dict, float]:
    """``fn(*args, **kwargs)``'s dataclass as a dict, and the seconds it took."""
    from dataclasses import asdict

    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return asdict(result), round(time.perf_counter() - start, 1)


def main() -> None:
    p = harness.parser(__doc__, out=harness.REPO / "runs" / "embed_reference.json", threads=True)
    p.add_argument("--model", default="minilm-l6", help="a sentence-transformers model dir or a tinyplm alias "
                                                        "(default: minilm-l6, the packaged all-MiniLM-L6-v2)")
    p.add_argument("--data-dir", type=Path, default=None, help="data root (default: tinyplm's, ../shared/data)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--device", default=None, help="torch device (default: sentence-transformers' choice)")
    p.add_argument("--skip", choices=["stsb", "squad"], action="append", default=[], help="leave a part out")
    args = p.parse_args()
    harness.set_threads(args.threads)

    from tinyplm.errors import TinyplmError
    from tinyplm.evaluate.embedding import retrieval_scores, similarity_scores
    from tinyplm.models.loading import resolve_model_dir
    from tinyplm.tasks import resolve_data_root
    from tinyplm.tasks.retrieval import squad_retrieval, stsb_pairs

    try:
        model_dir = resolve_model_dir(args.model)
        root = resolve_data_root(args.data_dir)
        pairs = None if "stsb" in args.skip else stsb_pairs(root / "glue" / "STS-B" / "dev.tsv")
        rset = None if "squad" in args.skip else squad_retrieval(root / "squad" / "dev-v1.1.json")
    except TinyplmError as exc:
        sys.exit(f"embed_reference: {exc}")
    embed = encoder(model_dir, args.batch_size, args.device)
    result: dict = {"model": str(model_dir), "data": str(root), "batch_size": args.batch_size}
    if pairs is not None:
        scores, seconds = timed(similarity_scores, embed, pairs)
        result["stsb"] = {**{k: round(v, 4) if isinstance(v, float) else v for k, v in scores.items()},
                          "seconds": seconds}
    if rset is not None:
        scores, seconds = timed(retrieval_scores, embed, rset)
        result["squad"] = {**{k: round(v, 4) if isinstance(v, float) else v for k, v in scores.items()},
                           "dropped": rset.dropped, "seconds": seconds}
    harness.save(args.out, result)
    print(json.dumps(result, indent=1))
    harness.finish(args.out)


if __name__ == "__main__":
    main()
