"""``tinyplm augment``: TinyBERT data augmentation of a task's training set (MLM + embedding
neighbours)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from tinyplm.cli.app import app, out
from tinyplm.errors import TinyplmError
from tinyplm.files import atomic_open, check_creatable


@app.command("augment")
def augment_cmd(
    task: Annotated[str, typer.Argument(help="task whose training set is augmented, e.g. sst2")],
    mlm_dir: Annotated[Path, typer.Option("--mlm", help="model dir with an MLM head (see fit-mlm-head)")],
    out_file: Annotated[Path, typer.Option("--out", "-o", help="JSONL file to write")],
    copies: Annotated[int, typer.Option(help="copies per example (TinyBERT: 20 large, 30 small tasks)")] = 20,
    p: Annotated[float, typer.Option(help="probability of replacing each word")] = 0.4,
    top_k: Annotated[int, typer.Option(help="MLM candidates per single-piece word")] = 15,
    neighbours: Annotated[int, typer.Option(help="embedding neighbours per multi-piece word")] = 15,
    candidates: Annotated[str, typer.Option(help="any (TinyBERT) or same_kind: words with letters only replaced "
                                                 "by candidates with letters, punctuation by punctuation")] = "any",
    max_examples: Annotated[int | None, typer.Option(help="augment only the first N examples")] = None,
    min_words: Annotated[int, typer.Option(help="augment only examples of at least N words")] = 0,
    seed: Annotated[int, typer.Option(help="seed")] = 42,
    pair: Annotated[str, typer.Option(help="each example's second text: augment it too, or keep it")] = "augment",
    data_dir: Annotated[str | None, typer.Option("--data-dir", help="GLUE folder")] = None,
) -> None:
    """TinyBERT data augmentation of a task's training set (MLM + embedding neighbours).

    Example: tinyplm augment rte --mlm runs/minilm-mlm --out runs/rte-aug.jsonl --copies 30
    """
    from tinyplm import tasks
    from tinyplm.distill.augment import EmbeddingNeighbours, augment, augmented_share
    from tinyplm.distill.cache import default_cache_dir
    from tinyplm.models import fingerprint
    from tinyplm.pretrain import load_mlm

    if out_file.exists():
        raise TinyplmError(f"{out_file}: already exists; choose another --out")
    spec = _augment_spec(mlm=str(mlm_dir), copies=copies, p=p, top_k=top_k, neighbours=neighbours, seed=seed,
                         pair=pair, min_words=min_words, candidates=candidates)  # the options, before any reading
    check_creatable(out_file.parent, "output folder", flag="--out")  # not after the examples are augmented
    examples = tasks.get(task, data_dir).read("train").examples
    total = len(examples)
    examples, _ = augmented_share(examples, min_words, max_examples)  # the file holds the augmented ones only
    if not examples:  # an empty file written and exit 0 before
        why = f"--max-examples {max_examples}" if max_examples is not None and max_examples < 1 else \
            f"--min-words {min_words}"
        raise TinyplmError(f"{why} leaves none of the {total} training examples of {task} to augment; "
                           "lower it")
    mlm, tok = load_mlm(mlm_dir)
    result = augment(examples, mlm, tok, spec, EmbeddingNeighbours(tok, mlm.get_input_embeddings().weight, neighbours),
                     default_cache_dir(), mlm_fingerprint=fingerprint(mlm_dir))
    with atomic_open(out_file) as fh:
        for ex in result.examples:
            row = {"text": ex.text, "text_pair": ex.text_pair, "label": ex.label, "line": ex.line}
            fh.write(json.dumps(row) + "\n")
    out.print(f"{len(result.examples)} examples -> {out_file} ({result.sentences_per_s:.0f} augmented sentences/s, "
              f"replacement rate {result.replacement_rate:.3f})")


def _augment_spec(**values):
    """The recipe's augment section from command-line values; bad values name the option."""
    from pydantic import ValidationError

    from tinyplm.config.schema import AugmentSpec

    try:
        return AugmentSpec(**values)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise TinyplmError(f"--{str(err['loc'][0]).replace('_', '-')}: {err['msg']}") from None
