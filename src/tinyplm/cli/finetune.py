"""``tinyplm finetune``: fine-tune a teacher on a task from flags (a recipe made on the command line)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tinyplm.cli.app import DataDir, Force, Overrides, Resume, Track, app
from tinyplm.cli.run import run_flags
from tinyplm.config.changes import folder_run_name


@app.command("finetune")
def finetune_cmd(
    task: Annotated[str, typer.Option("--task", help="task name, e.g. sst2")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="run directory")],
    model: Annotated[str, typer.Option("--model", help="alias or local HF model dir")] = "minilm-l6",
    epochs: Annotated[float, typer.Option(help="training epochs")] = 3.0,
    budget_minutes: Annotated[float | None, typer.Option(help="stop after this many minutes")] = None,
    lr: Annotated[float, typer.Option(help="peak learning rate")] = 5e-5,
    batch_size: Annotated[int, typer.Option(help="batch size")] = 32,
    max_length: Annotated[int, typer.Option(help="max tokens per example")] = 128,
    precision: Annotated[str, typer.Option(help="training: auto | bf16 | fp32")] = "auto",
    eval_precision: Annotated[str, typer.Option(
        help="dev checks and reported metrics: fp32 | bf16 (fp32: the same on every CPU)")] = "fp32",
    data_dir: DataDir = None,
    overrides: Overrides = None,
    force: Force = False,
    resume: Resume = False,
    track: Track = False,
) -> None:
    """Fine-tune a teacher on a task, then measure and report it.

    Example: tinyplm finetune --task rte --model minilm-l6 --out runs/rte-teacher --budget-minutes 5
    """
    train = {"epochs": epochs, "budget_minutes": budget_minutes, "lr": lr, "batch_size": batch_size,
             "precision": precision, "eval_precision": eval_precision}
    raw = {"name": folder_run_name(out_dir.name), "output_dir": str(out_dir),
           "task": {"name": task, "data_dir": data_dir, "max_length": max_length},
           "teacher": {"model": model, "finetune": train}, "measure": {"precision": eval_precision}}
    flags = {"task.name": "--task", "task.max_length": "--max-length", "task.data_dir": "--data-dir",
             "teacher.model": "--model", "measure.precision": "--eval-precision",
             **{f"teacher.finetune.{key}": "--" + key.replace("_", "-") for key in train}}
    run_flags(raw, overrides, out_dir, resume, force, track, flags)
