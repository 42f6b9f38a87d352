"""``tinyplm sweep``: a search over recipe keys, each trial an ordinary run, on Ray Tune."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tinyplm.cli.app import Resume, app, out


def print_sweep(rows, path: Path) -> None:
    """The sweep's table on stdout, then the path of its JSON (the last line)."""
    from rich.table import Table

    table = Table(title=f"{sum(r.status == 'finished' for r in rows)} of {len(rows)} trials finished")
    numbers = ("metric", "of teacher", "sent/s", "x teacher", "MB")
    for col in ("trial", "values", "status", *numbers, "Pareto"):
        table.add_column(col, justify="right" if col in numbers else "left")
    for r in rows:
        res = r.result
        cells = [f"{res.primary:.4f}", f"{res.retention:.1%}" if res.retention is not None else "-",
                 f"{res.throughput:,.0f}", f"{res.speedup:.2f}x" if res.speedup is not None else "-",
                 f"{res.disk_bytes / 1e6:.1f}"] if res else ["-"] * len(numbers)
        table.add_row(r.key, r.label, r.status if res or not r.error else f"failed: {r.error}", *cells,
                      "yes" if r.pareto else "")
    note = _note(path)
    if note:
        table.caption = note
    out.print(table)
    out.print(str(path), highlight=False, soft_wrap=True)


def _note(path: Path) -> str | None:
    """The table's note (draws that repeated a trial), as ``sweep.json`` holds it."""
    import json

    try:
        return json.loads(path.read_text(encoding="utf-8")).get("note")
    except (OSError, ValueError, AttributeError):
        return None


@app.command("sweep")
def sweep_cmd(
    recipe: Annotated[Path, typer.Argument(help="YAML recipe every trial runs")],
    space: Annotated[Path, typer.Option("--space", help="YAML search space over the recipe's keys")],
    max_concurrent: Annotated[int, typer.Option(min=1, help="trials running at once")] = 1,
    address: Annotated[str | None, typer.Option(
        help="an existing Ray cluster (ray start --head prints it); default: Ray on this machine")] = None,
    cpus_per_trial: Annotated[float | None, typer.Option(
        min=0.5, help="CPUs each trial asks Ray for (default: the cluster's CPUs / --max-concurrent)")] = None,
    resume: Resume = False,
    track: Annotated[bool, typer.Option(
        "--track", help="track in MLflow: the sweep as a parent run, one child run per trial")] = False,
) -> None:
    """Run a search space over a recipe's keys on Ray Tune: each trial is an ordinary run in its
    own run dir; one table and two Pareto plots across the trials.

    Example: tinyplm sweep recipes/glue/sst2_demo.yaml --space sweeps/sst2_lr.yaml --max-concurrent 2
    """
    from tinyplm.cli.app import err
    from tinyplm.config.sweep import file_kind, load_space
    from tinyplm.errors import RecipeError
    from tinyplm.sweep import SweepJob, run_sweep, sweep_dir_of
    from tinyplm.track import mlflow_uri

    if recipe.is_file() and file_kind(recipe) == "space":
        raise RecipeError(f"{recipe}: is a space file (it has params), not a run recipe; the command is: "
                          "tinyplm sweep RECIPE --space SPACE")
    spec = load_space(space)
    sweep_dir = sweep_dir_of(spec)
    job = SweepJob(recipe, spec, sweep_dir, address=address, max_concurrent=max_concurrent,
                   cpus_per_trial=cpus_per_trial, resume=resume, space_file=space,
                   mlflow=mlflow_uri(True, sweep_dir / "trials") if track else None)
    try:
        rows, path = run_sweep(job)
    except KeyboardInterrupt:
        err.print(f"interrupted; continue with `tinyplm sweep {recipe} --space {space} --resume` (finished trials "
                  "are read back, the others continue from their checkpoints)", markup=False, highlight=False,
                  soft_wrap=True)
        raise typer.Exit(130) from None
    print_sweep(rows, path)
    if any(r.status != "finished" for r in rows):
        raise typer.Exit(1)
