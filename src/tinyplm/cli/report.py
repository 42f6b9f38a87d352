"""``tinyplm report``: a run's report rebuilt from its results.json; the GLUE and paradigm tables across runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tinyplm.cli.app import app, out


@app.command("report")
def report_cmd(run_dir: Annotated[Path, typer.Argument(help="a finished run dir (holds results.json)")]) -> None:
    """Rebuild summary.md, report.html, plots and model cards from results.json.

    Example: tinyplm report runs/sst2_demo
    """
    from tinyplm.report import rebuild

    written = rebuild(run_dir)
    out.print(f"report: {written.get('report.html', run_dir / 'report.html')}")


@app.command("glue-table")
def glue_table_cmd(
    paths: Annotated[list[Path], typer.Argument(help="finished GLUE runs, or folders holding them (a sweep's)")],
    out_dir: Annotated[Path, typer.Option("--out", help="where glue.json and glue.md go")] = Path("runs/glue_table"),
) -> None:
    """The GLUE table in the papers' form across finished runs: one row per model (teacher, its
    best runtime, each student route), one column per task, runs of a task as seeds (mean ± std),
    the average over CoLA, SST-2, MRPC, STS-B and RTE. The last line is the JSON's path.

    Example: tinyplm glue-table runs/sweeps/glue_base --out runs/glue_table
    """
    from tinyplm.files import check_creatable
    from tinyplm.report.glue_table import TaskMetrics, glue_table, header, row_cells, write_glue_table
    from tinyplm.tasks.glue import GLUE_SPECS

    check_creatable(out_dir, "table folder", flag="--out")
    table = glue_table(paths, {name: TaskMetrics(spec.folder, spec.metrics) for name, spec in GLUE_SPECS.items()})
    _show(f"GLUE: {sum(len(v) for v in table.runs.values())} run(s)", header(table),
          [row_cells(row, table.tasks) for row in table.rows], table.skipped)
    out.print(str(write_glue_table(table, out_dir)), highlight=False, soft_wrap=True)


def _show(title: str, heads: list[str], rows: list[list[str]], skipped: dict[str, str]) -> None:
    """Print a table across runs (the first column left-aligned) and the files it left out."""
    from rich.table import Table

    shown = Table(title=title)
    for i, head in enumerate(heads):
        shown.add_column(head, justify="left" if i == 0 else "right")
    for row in rows:
        shown.add_row(*row)
    out.print(shown)
    for path, why in skipped.items():
        out.print(f"left out: {path} ({why})", highlight=False, soft_wrap=True)


@app.command("paradigm-table")
def paradigm_table_cmd(
    paths: Annotated[list[Path], typer.Argument(help="finished paradigm runs, or folders holding them (a sweep's)")],
    out_dir: Annotated[Path, typer.Option("--out", help="where paradigms.json and paradigms.md go")] = Path(
        "runs/paradigm_table"),
    reference: Annotated[str, typer.Option(help="the route every paradigm starts from (the distilled student)")] = (
        "student-minilm"),
) -> None:
    """What each compression paradigm buys on top of distillation, per task: one row per route of
    runs of recipes/glue_table/paradigms.yaml, and per task its score with the share of the
    teacher's and of the distilled student's it keeps, its throughput and size as multiples of the
    teacher. The last line is the JSON's path.

    Example: tinyplm paradigm-table runs/sweeps/glue_paradigms --out runs/paradigm_table
    """
    from tinyplm.files import check_creatable
    from tinyplm.report.glue_table import TaskMetrics
    from tinyplm.report.paradigm_table import header, paradigm_table, row_cells, write_paradigm_table
    from tinyplm.tasks.glue import GLUE_SPECS

    check_creatable(out_dir, "table folder", flag="--out")
    table = paradigm_table(paths, {name: TaskMetrics(spec.folder, spec.metrics) for name, spec in GLUE_SPECS.items()},
                           reference)
    _show(f"Paradigms on top of distillation: {sum(len(v) for v in table.runs.values())} run(s)", header(table),
          [row_cells(row, table.tasks) for row in table.rows], table.skipped)
    out.print(str(write_paradigm_table(table, out_dir)), highlight=False, soft_wrap=True)
