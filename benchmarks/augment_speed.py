"""TinyBERT augmentation speed on SST-2 with the packaged MiniLM -> one JSON object on stdout.

    .venv/bin/python benchmarks/augment_speed.py                    # fits a throw-away head first
    .venv/bin/python benchmarks/augment_speed.py --mlm-dir runs/minilm-mlm   # a fitted teacher

The packaged MiniLM has no MLM head; without ``--mlm-dir`` a head is fitted for ``--head-steps``
steps on the shipped corpus (enough for a speed figure, not for good candidates). The figure is
augmented sentences per second (copies made / seconds), measured over the whole ``augment`` call
without a cache (candidate search with the MLM, neighbours, drawing the copies).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import torch

import _harness as harness
from tinyplm import tasks
from tinyplm.config.schema import AugmentSpec
from tinyplm.distill.augment import EmbeddingNeighbours, augment
from tinyplm.models import resolve_model_dir
from tinyplm.models.infer import precision_name, use_bf16
from tinyplm.pretrain import fit_mlm_head, load_mlm, read_corpus


def main() -> None:
    ap = harness.parser(__doc__, threads=True)
    ap.add_argument("--n", type=int, default=200, help="SST-2 train sentences to augment")
    ap.add_argument("--copies", type=int, default=20)
    ap.add_argument("--mlm-dir", type=Path, default=None, help="teacher with a fitted MLM head")
    ap.add_argument("--head-steps", type=int, default=10, help="steps of the throw-away head fit")
    ap.add_argument("--corpus", type=Path, default=harness.DATA / "corpus" / "wikitext")
    ap.add_argument("--precision", default="auto", choices=["auto", "bf16", "fp32"])
    args = ap.parse_args()
    harness.set_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        head_seconds = None
        mlm_dir = args.mlm_dir
        if mlm_dir is None:
            t0 = time.perf_counter()
            texts = read_corpus([args.corpus], max_docs=2000)
            mlm_dir = Path(tmp) / "minilm-mlm"
            fit_mlm_head(resolve_model_dir("minilm-l6"), texts, mlm_dir, steps=args.head_steps, batch_size=16,
                         max_length=64, eval_max=32, progress=False)
            head_seconds = round(time.perf_counter() - t0, 1)
        mlm, tok = load_mlm(mlm_dir)
        examples = tasks.get("sst2").read("train").examples[: args.n]
        spec = AugmentSpec(copies=args.copies)
        neighbours = EmbeddingNeighbours.from_model(mlm, tok, k=spec.neighbours)
        res = augment(examples, mlm, tok, spec, neighbours, progress=False, precision=args.precision)
    print(json.dumps({
        "originals": len(examples), "sentences": len(res.examples) - len(examples),
        "seconds": round(res.seconds, 2), "sentences_per_s": round(res.sentences_per_s, 1),
        "replacement_rate": round(res.replacement_rate, 4), "mlm_rows": res.mlm_rows,
        "threads": torch.get_num_threads(), "precision": precision_name(use_bf16(args.precision)),
        "head_fit_seconds": head_seconds,
        "example": [res.examples[0].text, res.examples[len(examples)].text],
    }))


if __name__ == "__main__":
    main()
