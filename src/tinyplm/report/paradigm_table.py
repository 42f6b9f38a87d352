"""The paradigm table: what each compression paradigm buys on top of distillation, task by task.

Read from finished runs in which every paradigm is a route starting from one distilled student
(``recipes/glue_table/paradigms.yaml``: one run per task, all variants measured side by side). One
row per route (the teacher first), and per task: the route's score (the mean of the task's official
metrics, x 100, mean over the task's runs), the share of the teacher's score it keeps, the share of
the *reference* route's (the distilled student every paradigm starts from) and its throughput and
size as multiples of the teacher timed in the same run. So a reader sees, per kind of task, what a
paradigm costs against the student it was applied to and where it lands against the teacher.

Runs, routes and task cells are read as the GLUE table reads them (:mod:`tinyplm.report.glue_table`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tinyplm.errors import TinyplmError
from tinyplm.report.glue_table import (
    ORDER,
    GlueTasks,
    TaskCell,
    TaskMetrics,
    read_runs,
    task_cell,
    write_files,
)
from tinyplm.report.run_finding import find_runs

#: The route every paradigm starts from in recipes/glue_table/paradigms.yaml.
REFERENCE = "student-minilm"
SCHEMA = 1


@dataclass(frozen=True)
class ParadigmCell:
    """One route on one task: the stage it ends as (in its first run), its ``score`` (x 100, mean
    over the task's runs), the share of the teacher's score and of the reference route's it keeps
    (None without either), and its mean throughput and size multiples of the teacher."""

    stage: str
    score: float
    of_teacher: float | None
    of_reference: float | None
    faster: float | None
    smaller: float | None
    runs: int


@dataclass(frozen=True)
class ParadigmRow:
    """One route of the table and its cell per task (a task it was not run on has none)."""

    route: str
    cells: dict[str, ParadigmCell]


@dataclass(frozen=True)
class ParadigmTable:
    """The table: its tasks in GLUE's column order, the reference route, the rows (the teacher
    first, then the routes as the recipe lists them), the run dirs per task and the
    ``results.json`` files left out with why."""

    tasks: list[str]
    reference: str
    rows: list[ParadigmRow]
    runs: dict[str, list[str]]
    specs: dict[str, TaskMetrics]
    skipped: dict[str, str] = field(default_factory=dict)


def _mean(values: list[float | None]) -> float | None:
    return sum(values) / len(values) if values and all(v is not None for v in values) else None  # type: ignore[arg-type, misc]


def _share(score: float, of: TaskCell | None) -> float | None:
    return score / of.score.mean if of is not None and of.score.mean > 0 else None


def paradigm_cell(cell: TaskCell, teacher: TaskCell | None, reference: TaskCell | None) -> ParadigmCell:
    """``cell`` against the teacher's and the reference route's cells of the same task."""
    score = cell.score.mean
    return ParadigmCell(cell.runs[0].stage, score, _share(score, teacher), _share(score, reference),
                        _mean([r.faster for r in cell.runs]), _mean([r.smaller for r in cell.runs]), len(cell.runs))


def paradigm_table(paths: list[Path], tasks: GlueTasks, reference: str = REFERENCE) -> ParadigmTable:
    """The table of every run of one of ``tasks`` at or under ``paths``; raises ``TinyplmError``
    when there is none, or when no task's runs have the ``reference`` route (naming the routes
    they have)."""
    by_task, runs, skipped = read_runs(find_runs(paths), tasks)
    if not by_task:
        found = "; ".join(f"{k}: {v}" for k, v in skipped.items()) or "no results.json"
        raise TinyplmError(f"no finished run of {', '.join(tasks)} under {', '.join(map(str, paths))} ({found})")
    if not any(reference in routes for routes in by_task.values()):
        have = sorted({r for routes in by_task.values() for r in routes})
        raise TinyplmError(f"no run under {', '.join(map(str, paths))} has the reference route {reference!r} "
                           f"(the distilled student the paradigms start from); routes there: {', '.join(have)}")
    order = [t for t in ORDER if t in by_task] + sorted(t for t in by_task if t not in ORDER)
    cells: dict[str, dict[str, TaskCell]] = {}
    for t in order:
        for route, route_runs in by_task[t].items():
            if (c := task_cell(t, tasks[t].metrics, route_runs)) is not None:
                cells.setdefault(route, {})[t] = c
    routes = sorted(cells, key=lambda r: r != "teacher")  # the teacher first, the rest as the recipes list them
    rows = [ParadigmRow(r, {t: paradigm_cell(c, cells.get("teacher", {}).get(t), cells.get(reference, {}).get(t))
                            for t, c in cells[r].items()}) for r in routes]
    return ParadigmTable(order, reference, rows, runs, {t: tasks[t] for t in order}, skipped)


def header(table: ParadigmTable) -> list[str]:
    """Column heads: the model, then per task its score with the share of the teacher's and of the
    reference's it keeps, its throughput and its size as multiples of the teacher."""
    heads = ["model"]
    for t in table.tasks:
        label = table.specs[t].label
        heads += [f"{label} (of teacher / of {table.reference})", f"{label} x sent/s", f"{label} x smaller"]
    return heads


def _pct(value: float | None) -> str:
    return f"{value:.1%}" if value is not None else "—"


def _times(value: float | None) -> str:
    return f"{value:.1f}x" if value is not None else "—"


def row_cells(row: ParadigmRow, tasks: list[str]) -> list[str]:
    """One row as text, three cells per task (a dash where the route was not run on it)."""
    cells = [row.route]
    for t in tasks:
        c = row.cells.get(t)
        if c is None:
            cells += ["—", "—", "—"]
            continue
        cells += [f"{c.score:.1f} ({_pct(c.of_teacher)} / {_pct(c.of_reference)})", _times(c.faster), _times(c.smaller)]
    return cells


def markdown(table: ParadigmTable) -> str:
    """The table as markdown with what it shows under it."""
    heads = header(table)
    lines = ["| " + " | ".join(heads) + " |", "|:---|" + "---:|" * (len(heads) - 1)]
    lines += ["| " + " | ".join(row_cells(r, table.tasks)) + " |" for r in table.rows]
    runs = ", ".join(f"{table.specs[t].label} {len(table.runs[t])}" for t in table.tasks)
    lines += ["", f"Runs per task: {runs}. Score: the mean of the task's official metrics x 100 on its dev split "
              f"(mean over runs), then the share of the teacher's score it keeps and of {table.reference}'s, the "
              "distilled student every paradigm starts from. x sent/s, x smaller: the model's batch throughput "
              "over the teacher's timed in the same run, the teacher's size on disk over the model's."]
    if table.skipped:
        lines += ["", "Left out: " + "; ".join(f"{k} ({v})" for k, v in table.skipped.items()) + "."]
    return "\n".join(lines) + "\n"


def write_paradigm_table(table: ParadigmTable, out_dir: Path) -> Path:
    """Write ``paradigms.json`` and ``paradigms.md`` into ``out_dir`` (atomically); returns the
    JSON's path. Raises ``TinyplmError`` naming a file that cannot be written."""
    data = {"schema": SCHEMA, "tasks": table.tasks, "reference": table.reference, "runs": table.runs,
            "specs": {t: asdict(spec) for t, spec in table.specs.items()}, "skipped": table.skipped,
            "rows": [asdict(r) for r in table.rows]}
    write_files(out_dir, {"paradigms.json": json.dumps(data, indent=2) + "\n", "paradigms.md": markdown(table)})
    return out_dir / "paradigms.json"
