"""Pre-training subcommands: ``tinyplm pretrain RECIPE`` and ``tinyplm tokenizer train``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tinyplm.cli.app import Force, Resume, app, out

tokenizer_app = typer.Typer(help="Train subword tokenizers.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(tokenizer_app, name="tokenizer")

@tokenizer_app.command("train")
def tokenizer_train_cmd(
    files: Annotated[list[Path], typer.Argument(help="text files or folders (*.txt); Gutenberg headers are cut")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="where to save the tokenizer (HF format)")],
    kind: Annotated[str, typer.Option(help="wordpiece | bpe | bytelevel-bpe")] = "wordpiece",
    vocab_size: Annotated[int, typer.Option(help="vocabulary size, specials included")] = 30000,
    min_frequency: Annotated[int, typer.Option(help="drop merges seen fewer times")] = 2,
    cased: Annotated[bool, typer.Option("--cased", help="keep case (byte-level BPE always does)")] = False,
    max_docs: Annotated[int | None, typer.Option(help="use at most this many paragraphs")] = None,
) -> None:
    """Train a WordPiece, BPE or byte-level BPE tokenizer on text files.

    Example: tinyplm tokenizer train ../shared/data/corpus/wikitext --kind wordpiece --vocab-size 8000 --out runs/tok
    """
    from tinyplm.pretrain.tokenizer import train_tokenizer

    path = train_tokenizer(files, kind, vocab_size, out_dir, lowercase=not cased, min_frequency=min_frequency,
                           max_items=max_docs)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    out.print(f"{kind} tokenizer, {len(tok)} tokens -> {path}")

@app.command("pretrain")
def pretrain_cmd(
    recipe: Annotated[Path, typer.Argument(help="pre-training recipe (YAML), e.g. recipes/pretrain/mlm_small.yaml")],
    overrides: Annotated[list[str] | None, typer.Argument(
        help="overrides key=value, e.g. train.budget_minutes=5")] = None,
    resume: Resume = False,
    force: Force = False,
) -> None:
    """Pre-train a BERT encoder (MLM, whole-word/span/n-gram masking, NSP/SOP, ELECTRA),
    from scratch or continued from a checkpoint; held-out MLM loss, accuracy and
    pseudo-perplexity before and after.

    Example: tinyplm pretrain recipes/pretrain/mlm_small.yaml train.budget_minutes=10
    """
    from tinyplm.config.load import load_recipe
    from tinyplm.config.pretrain import PretrainRecipe
    from tinyplm.pretrain.run import output_dir, pretrain

    cfg = load_recipe(recipe, overrides, schema=PretrainRecipe)
    record = pretrain(cfg, resume=resume, force=force)
    table = Table(title=f"pre-training '{cfg.name}' ({record.steps} steps, {record.train_seconds:.0f} s)")
    table.add_column("held-out")
    table.add_column("before", justify="right")
    table.add_column("after", justify="right")
    for key, after in record.after.items():
        b = record.before.get(key)
        table.add_row(key, "" if b is None else f"{b:.4f}", f"{after:.4f}")
    out.print(table)
    out.print(f"model: {output_dir(cfg) / 'model'}")
    out.print(f"results: {output_dir(cfg) / 'pretrain.json'}")
