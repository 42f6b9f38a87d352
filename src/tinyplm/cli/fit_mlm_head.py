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
        help="text files/folders, or tables (.csv, .tsv, .jsonl) with --text-field (default: "
             "../shared/data/corpus)")] = None,
    text_field: Annotated[str | None, typer.Option(
        help="the column (key) of a table's rows that holds the text")] = None,
    steps: Annotated[int, typer.Option(help="optimiser steps")] = 500,
    batch_size: Annotated[int, typer.Option(help="batch size")] = 32,
    max_length: Annotated[int, typer.Option(help="max tokens per text")] = 128,
    lr: Annotated[float, typer.Option(help="learning rate")] = 1e-3,
    max_docs: Annotated[int | None, typer.Option(help="use at most this many paragraphs")] = None,
    seed: Annotated[int, typer.Option(help="seed")] = 0,
) -> None:
    """Train only a masked-LM head on a frozen encoder (the packaged MiniLM ships none).

    Example: tinyplm fit-mlm-head minilm-l6 --out runs/minilm-mlm --steps 500
    """
    from tinyplm.models import resolve_model_dir
    from tinyplm.pretrain import fit_mlm_head, read_corpus

    if out_dir.exists() and any(out_dir.iterdir()):
        raise TinyplmError(f"{out_dir}: already exists and is not empty; choose another --out")
    texts = read_corpus(corpus or _default_corpus(), max_docs=max_docs, text_field=text_field)
    metrics = fit_mlm_head(resolve_model_dir(model), texts, out_dir, steps=steps, batch_size=batch_size,
                           max_length=max_length, lr=lr, seed=seed)
    out.print_json(json.dumps(metrics))
    out.print(f"model with MLM head: {out_dir}")
