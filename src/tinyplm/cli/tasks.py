"""``tinyplm tasks``: the tasks, their metrics and labels, and whether their data files are present."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from tinyplm.cli.app import app, out
from tinyplm.tasks.heads import Head


@app.command("tasks")
def tasks_cmd(data_dir: Annotated[str | None, typer.Option(
        "--data-dir", help="data root: a GLUE folder, or the folder holding squad/ and conll2003/")] = None) -> None:
    """List the tasks, their metrics and whether their data files are present.

    Example: tinyplm tasks --data-dir ../shared/data/glue
    """
    from tinyplm import tasks

    table = Table(title="tasks")
    for col in ("task", "metrics", "labels", "files present"):
        table.add_column(col)
    for name in tasks.names():
        t = tasks.get(name, data_dir)
        present = t.data_present()
        shown = ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in present.items())
        row = Head(t.head).row  # a head whose outputs the labels do not name shows what its labels are
        labels = (", ".join(t.labels) or "regression") if row.named_by_labels else str(row.labels)
        table.add_row(name, ", ".join(t.metrics), labels, shown)
    out.print(table)
