"""``tinyplm distill``: distil a fine-tuned teacher into one student from flags (a recipe made on the
command line)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tinyplm.cli.app import DataDir, Force, Overrides, Resume, Track, app, int_list
from tinyplm.cli.run import run_flags
from tinyplm.config.changes import folder_run_name
from tinyplm.errors import RecipeError


@app.command("distill")
def distill_cmd(
    teacher: Annotated[str, typer.Option("--teacher", help="fine-tuned teacher dir (e.g. RUN_DIR/teacher)")],
    task: Annotated[str, typer.Option("--task", help="task name, e.g. sst2")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="run directory")],
    layers: Annotated[int | None, typer.Option(help="student layers")] = None,
    hidden: Annotated[int | None, typer.Option(help="student hidden size")] = None,
    heads: Annotated[int | None, typer.Option(help="student attention heads")] = None,
    ffn: Annotated[int | None, typer.Option(help="student FFN width")] = None,
    teacher_layers: Annotated[str | None, typer.Option(help="init from these teacher layers, e.g. 1,3,5")] = None,
    temperature: Annotated[float, typer.Option(help="KD temperature")] = 2.0,
    kd_weight: Annotated[float, typer.Option(help="weight of the soft-target loss")] = 1.0,
    hard_weight: Annotated[float, typer.Option(help="weight of the hard-label loss")] = 0.0,
    epochs: Annotated[float, typer.Option(help="training epochs")] = 3.0,
    budget_minutes: Annotated[float | None, typer.Option(help="stop after this many minutes")] = None,
    lr: Annotated[float, typer.Option(help="peak learning rate")] = 1e-4,
    max_length: Annotated[int, typer.Option(help="max tokens per example")] = 128,
    data_dir: DataDir = None,
    overrides: Overrides = None,
    force: Force = False,
    resume: Resume = False,
    track: Track = False,
) -> None:
    """Distil a fine-tuned teacher into one student (prediction-layer KD), measure both.

    Example: tinyplm distill --teacher runs/sst2/teacher --task sst2 --teacher-layers 1,3,5 --out runs/sst2-l3
    """
    student: dict = {"objective": {"temperature": temperature, "kd_weight": kd_weight, "hard_weight": hard_weight},
                     "train": {"epochs": epochs, "budget_minutes": budget_minutes, "lr": lr}}
    shape = {"--layers": layers, "--hidden": hidden, "--heads": heads, "--ffn": ffn}
    if any(v is not None for v in shape.values()):
        left = [name for name, v in shape.items() if v is None]
        if left:  # said in the command's words, not as the recipe key it becomes
            raise RecipeError(f"a student's shape takes all of --layers, --hidden, --heads and --ffn; "
                              f"{', '.join(left)} missing (or give --teacher-layers alone to copy the teacher's "
                              "layers)")
        student["shape"] = {"layers": layers, "hidden": hidden, "heads": heads, "ffn": ffn}
    if teacher_layers:
        student["teacher_layers"] = int_list(teacher_layers, "--teacher-layers")
    raw = {"name": folder_run_name(out_dir.name), "output_dir": str(out_dir),
           "task": {"name": task, "data_dir": data_dir, "max_length": max_length},
           "teacher": {"model": teacher}, "students": [student]}
    flags = {"task.name": "--task", "task.max_length": "--max-length", "task.data_dir": "--data-dir",
             "teacher.model": "--teacher", "students[0].teacher_layers": "--teacher-layers",
             **{f"students[0].{part}.{key}": "--" + key.replace("_", "-")
                for part in ("objective", "train", "shape") for key in student.get(part, {})}}
    run_flags(raw, overrides, out_dir, resume, force, track, flags)
