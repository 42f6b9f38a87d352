"""``tinyplm fit-mlm-head``: a masked-LM head trained on a frozen encoder (for ``augment``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from tinyplm.cli.app import app, out
from tinyplm.errors import TinyplmError


def _default_corpus() -> list[Path]:
    from tinyplm.tasks.paths import resolve_glue_dir

    data = resolve_glue_dir(None).parent
    return [data / "corpus" / "books", data / "corpus" / "wikitext"]


@app.command("fit-mlm-head")
def fit_mlm_head_cmd(
    model: Annotated[str, typer.Argument(help="alias (minilm-l6) or HF model dir without an MLM head")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="where to save the model with its MLM head")],
    corpus: Annotated[list[Path] | None, typer.Option(
        help="text files/folders, or tables (.csv, .tsv, .jsonl, .json) with --text-field (default: "
             "../shared/data/corpus)")] = None,
    text_field: Annotated[str | None, typer.Option(
        help="the column (key) of a table's rows that holds the text")] = None,
    steps: Annotated[int, typer.Option(help="optimiser steps")] = 500,
    batch_size: Annotated[int, typer.Option(help="batch size")] = 32,
    max_length: Annotated[int | None, typer.Option(
        help="tokens per window of text (default: 128, or the model's positions when fewer)")] = None,
    lr: Annotated[float, typer.Option(help="learning rate")] = 1e-3,
    max_docs: Annotated[int | None, typer.Option(help="use at most this many paragraphs")] = None,
    seed: Annotated[int, typer.Option(help="seed")] = 0,
    resume: Annotated[bool, typer.Option(
        "--resume", help="continue an interrupted fit from its checkpoints (same options)")] = False,
) -> None:
    """Train only a masked-LM head on a frozen encoder (the packaged MiniLM ships none).

    Example: tinyplm fit-mlm-head minilm-l6 --out runs/minilm-mlm --steps 500
    """
    from tinyplm.files import check_creatable
    from tinyplm.models import resolve_model_dir
    from tinyplm.pretrain import fit_mlm_head, read_corpus

    check_creatable(out_dir, "model destination", flag="--out")  # not after the head is trained
    if out_dir.exists() and any(out_dir.iterdir()):
        raise TinyplmError(f"{out_dir}: already exists and is not empty; choose another --out")
    src = resolve_model_dir(model)
    max_length = _check_options(src, steps, batch_size, max_length, lr)  # before the corpus is read
    texts = read_corpus(corpus or _default_corpus(), max_docs=max_docs, text_field=text_field)
    metrics = fit_mlm_head(src, texts, out_dir, steps=steps, batch_size=batch_size, max_length=max_length, lr=lr,
                           seed=seed, resume=resume)
    out.print_json(json.dumps(metrics))
    out.print(f"model with MLM head: {out_dir}")


def _check_options(src: Path, steps: int, batch_size: int, max_length: int | None, lr: float) -> int:
    """Refuse options no fit can run with, naming the flag (a pydantic traceback, a fit that masked
    nothing, or a shape error mid-fit before): the model's own positions bound ``--max-length``.
    -> the max length to fit with (given, or 128 cut to the model's positions)."""
    from tinyplm.models import check_model_dir, roles

    for flag, value in (("--steps", steps), ("--batch-size", batch_size)):
        if value < 1:
            raise TinyplmError(f"{flag}: expected at least 1, got {value}")
    if not lr > 0:
        raise TinyplmError(f"--lr: expected a learning rate above 0, got {lr}")
    if max_length is not None and max_length < 8:
        raise TinyplmError(f"--max-length: expected at least 8 tokens (a text and its specials, some to mask), "
                           f"got {max_length}")
    config = check_model_dir(src)
    usable = roles.usable_positions(config)
    positions = usable if usable is not None else config.get("max_position_embeddings")
    if not isinstance(positions, int):
        return max_length or 128
    if max_length is not None and max_length > positions:
        raise TinyplmError(f"--max-length {max_length} is longer than the {positions} positions of {src}; give at "
                           f"most {positions}")
    return max_length or min(128, positions)
