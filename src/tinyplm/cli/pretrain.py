"""``tinyplm pretrain RECIPE``: pre-train a BERT encoder (``tinyplm tokenizer train`` makes its
tokenizer: cli/tokenizer.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tinyplm.cli.app import Force, Resume, app, out


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
