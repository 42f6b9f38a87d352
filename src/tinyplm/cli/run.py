"""``tinyplm run`` and ``tinyplm validate``; :func:`run_and_report` and :func:`run_flags`, which
``finetune`` and ``distill`` (cli/finetune.py, cli/distill.py) use to run the recipe their flags make."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tinyplm.cli.app import Force, Overrides, Resume, Track, app, err, out, print_stages
from tinyplm.files import RESOLVED


def run_and_report(cfg, run_dir: Path | None, resume: bool, force: bool, track: bool = False) -> None:
    """Run ``cfg`` (a RunConfig) into ``run_dir`` (default: its output_dir), then print its table."""
    from tinyplm.evaluate.cpu_kind import cpu_kind
    from tinyplm.run import run, run_dir_of
    from tinyplm.train import get_accelerator

    main, kind = get_accelerator().is_main_process, cpu_kind()
    if main:  # which kind of CPU the figures will hold on, before any work
        for line in kind.lines():
            out.print(line, highlight=False)
    if track:
        cfg = cfg.model_copy(update={"tracking": cfg.tracking.with_mlflow()})
    target = run_dir or run_dir_of(cfg)
    if main and resume and not (Path(target) / RESOLVED).is_file():  # a typo, or a relative path from elsewhere
        err.print(f"note: --resume: {target} holds no run to continue; a new run starts there", markup=False,
                  highlight=False, soft_wrap=True)
    record = run(cfg, target, resume=resume, force=force)
    if main:
        print_stages(record)
        for line in kind.lines("measured on"):
            out.print(line, highlight=False)
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

    run_and_report(load_recipe(recipe, overrides), run_dir, resume, force, track)


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
        cap = cfg.task.max_train_examples  # what the run trains on: the first so many of the split
        train = f"{cap} of {len(data.train)}" if cap is not None and cap < len(data.train) else f"{len(data.train)}"
        counts = f", {train} train / " + " / ".join(f"{len(v)} {k}" for k, v in data.evals.items())
    out.print(f"{recipe}: ok (task {cfg.task.name}{counts}; teacher {teacher}; students: {students})", soft_wrap=True)
    for note in checked.notes if checked else ():
        out.print(f"note: {note}", soft_wrap=True, markup=False)


def run_flags(raw: dict, overrides: list[str] | None, run_dir: Path, resume: bool, force: bool, track: bool,
              flags: dict[str, str] | None = None) -> None:
    """Run the recipe a command's flags made (``raw``, a recipe dict) with ``overrides`` applied;
    a bad key or value is a ``TinyplmError`` naming it, as in a recipe file: the override that set
    it, or the option (``flags``: dotted key -> option) beside the key."""
    from tinyplm.config import apply_override, validate_recipe

    for item in overrides or []:
        apply_override(raw, item)
    cfg = validate_recipe(raw, source="command line", overrides=overrides, flags=flags)
    run_and_report(cfg, run_dir, resume, force, track)
