"""Commands that run recipes: run, validate, finetune, distill."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tinyplm.cli.app import DataDir, Force, Overrides, Resume, app, int_list, out, print_stages

#: ``--track`` on the commands that run a recipe: MLflow on at its default place (config/tracking.py).
Track = Annotated[bool, typer.Option(
    "--track", help="track the run in MLflow (recipe tracking.mlflow: true unless it names a URI; needs "
    "pip install 'tinyplm[track]')")]


def _run_and_report(cfg, run_dir: Path | None, resume: bool, force: bool, track: bool = False) -> None:
    from tinyplm.run import run, run_dir_of

    if track:
        cfg = cfg.model_copy(update={"tracking": cfg.tracking.with_mlflow()})
    target = run_dir or run_dir_of(cfg)
    record = run(cfg, target, resume=resume, force=force)
    from tinyplm.train import get_accelerator

    if get_accelerator().is_main_process:
        print_stages(record)
        out.print(f"report: {Path(target) / 'report.html'}")


@app.command("run")
def run_cmd(
    recipe: Annotated[Path, typer.Argument(help="YAML recipe")],
    overrides: Overrides = None,
    run_dir: Annotated[Path | None, typer.Option(
        "--run-dir", "-o", help="run directory (default: recipe output_dir)")] = None,
    force: Force = False,
    resume: Resume = False,
    track: Track = False,
) -> None:
    """Run a recipe: fine-tune the teacher, distil the students, measure, report.

    Example: tinyplm run recipes/glue/sst2_demo.yaml students.*.train.budget_minutes=4
    """
    from tinyplm.config import load_recipe

    _run_and_report(load_recipe(recipe, overrides), run_dir, resume, force, track)


@app.command("validate")
def validate_cmd(
    recipe: Annotated[Path, typer.Argument(help="YAML recipe (a run recipe, or a pre-training recipe)")],
    overrides: Overrides = None,
    check_inputs: Annotated[bool, typer.Option(
        "--inputs/--no-inputs", help="also read the data and check the teacher (or corpus and tokenizer)")] = True,
) -> None:
    """Check a recipe without running it: its keys, its data files and its teacher. A pre-training
    recipe (it has an 'objective' section) is checked against its own schema, with its corpus,
    init checkpoint and tokenizer.

    Example: tinyplm validate recipes/glue/sst2_demo.yaml
    """
    from tinyplm.config import load_recipe, student_name
    from tinyplm.config.load import is_pretrain_recipe
    from tinyplm.config.pretrain import PretrainRecipe
    from tinyplm.run import preflight

    if is_pretrain_recipe(recipe):
        from tinyplm.pretrain.run import preflight as pretrain_preflight

        spec = load_recipe(recipe, overrides, schema=PretrainRecipe)
        texts = pretrain_preflight(spec) if check_inputs else None
        counts = f", {len(texts.train)} train / {len(texts.held)} held-out texts" if texts else ""
        out.print(f"{recipe}: ok (pre-training, objective {spec.objective.kind}{counts})", soft_wrap=True)
        return
    from tinyplm.track import check_available

    cfg = load_recipe(recipe, overrides)
    check_available(cfg.tracking)
    checked = preflight(cfg) if check_inputs else None
    data = checked.data if checked else None
    teacher = checked.teacher_dir if checked else cfg.teacher.model
    students = ", ".join(student_name(s) for s in cfg.students) or "none"
    counts = ""
    if data:
        counts = f", {len(data.train)} train / " + " / ".join(f"{len(v)} {k}" for k, v in data.evals.items())
    out.print(f"{recipe}: ok (task {cfg.task.name}{counts}; teacher {teacher}; students: {students})", soft_wrap=True)


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
    raw = {"name": out_dir.name, "output_dir": str(out_dir),
           "task": {"name": task, "data_dir": data_dir, "max_length": max_length},
           "teacher": {"model": model, "finetune": train}, "measure": {"precision": eval_precision}}
    _run_and_report(_validated(raw, overrides), out_dir, resume, force, track)


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
    if any(v is not None for v in (layers, hidden, heads, ffn)):
        student["shape"] = {"layers": layers, "hidden": hidden, "heads": heads, "ffn": ffn}
    if teacher_layers:
        student["teacher_layers"] = int_list(teacher_layers, "--teacher-layers")
    raw = {"name": out_dir.name, "output_dir": str(out_dir),
           "task": {"name": task, "data_dir": data_dir, "max_length": max_length},
           "teacher": {"model": teacher}, "students": [student]}
    _run_and_report(_validated(raw, overrides), out_dir, resume, force, track)


def _validated(raw: dict, overrides: list[str] | None):
    from tinyplm.config import apply_override, validate_recipe

    for item in overrides or []:
        apply_override(raw, item)
    return validate_recipe(raw, source="command line")
