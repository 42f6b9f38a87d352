"""``tinyplm tokenizer train``: a WordPiece, BPE or byte-level BPE tokenizer trained on text files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tinyplm.cli.app import app, out

tokenizer_app = typer.Typer(help="Train subword tokenizers.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(tokenizer_app, name="tokenizer")


@tokenizer_app.command("train")
def tokenizer_train_cmd(
    files: Annotated[list[Path], typer.Argument(help="text files or folders (*.txt; Gutenberg headers are cut), "
                                                "or tables (.csv, .tsv, .jsonl, .json) with --text-field")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="where to save the tokenizer (HF format)")],
    kind: Annotated[str, typer.Option(help="wordpiece | bpe | bytelevel-bpe")] = "wordpiece",
    vocab_size: Annotated[int, typer.Option(help="vocabulary size, specials included")] = 30000,
    min_frequency: Annotated[int, typer.Option(help="drop merges seen fewer times")] = 2,
    cased: Annotated[bool, typer.Option("--cased", help="keep case (byte-level BPE always does)")] = False,
    max_docs: Annotated[int | None, typer.Option(help="use at most this many paragraphs")] = None,
    text_field: Annotated[str | None, typer.Option(
        help="the column (key) of a table's rows that holds the text")] = None,
) -> None:
    """Train a WordPiece, BPE or byte-level BPE tokenizer on text files.

    Example: tinyplm tokenizer train ../shared/data/corpus/wikitext --kind wordpiece --vocab-size 8000 --out runs/tok
    """
    from tinyplm.pretrain.tokenizer import train_tokenizer

    path = train_tokenizer(files, kind, vocab_size, out_dir, lowercase=not cased, min_frequency=min_frequency,
                           max_items=max_docs, text_field=text_field)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    out.print(f"{kind} tokenizer, {len(tok)} tokens -> {path}")
    if len(tok) < vocab_size // 2:  # the corpus ran out of pieces: a model sized to --vocab-size would waste rows
        out.print(f"note: the corpus gave {len(tok)} tokens of the {vocab_size} asked for (--vocab-size): it holds no "
                  "more pieces seen often enough (--min-frequency); a model from scratch is sized to the tokenizer, "
                  "so it is that small", soft_wrap=True, markup=False)
