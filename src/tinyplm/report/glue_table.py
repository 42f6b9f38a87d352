"""The GLUE table in the papers' form, across finished runs: one row per model (the teacher, the
teacher on its best runtime, each student route), one column per task with its official metrics,
the average over the averaged tasks, and each row's size and throughput as multiples of the
teacher measured in the same run.

Runs are found under the paths given (a run dir holds ``results.json``; a sweep's folder holds its
trials' run dirs). Runs of one GLUE task are repeats of it (seeds): each cell is their mean and
sample standard deviation. A run of any other task is left out and named in ``skipped``.

A *route* is a student of the recipe and what its compress steps made of it: the stages named
``ROUTE`` and ``ROUTE.STEP...``; its row reads the last of them (what the route ends as). The
teacher's row is the stage ``teacher``.

Which tasks are GLUE's and their official metrics come in as :class:`TaskMetrics` (the CLI reads them
from ``tasks.glue.GLUE_SPECS``: the report layer reads records, not task definitions). A task's
score in the average is the mean of its official metrics (MRPC's F1 and accuracy, STS-B's Pearson
and Spearman), as the GLUE benchmark scores it; the average is over
:data:`AVERAGED` (WNLI is reported apart, as GLUE papers do), and only a row with every averaged
task has one. Metrics are shown x 100.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tinyplm.errors import TinyplmError
from tinyplm.files import RESULTS, write_atomic
from tinyplm.report.records import RunRecord, StageRecord
from tinyplm.report.run_finding import FoundRuns, find_runs

#: The tasks whose scores make the average (the proposal's GLUE table; WNLI apart).
AVERAGED: tuple[str, ...] = ("cola", "sst2", "mrpc", "stsb", "rte")
#: Column order: the averaged tasks, then the others GLUE has.
ORDER: tuple[str, ...] = (*AVERAGED, "qnli", "qqp", "mnli", "wnli")
#: How a metric is headed in the table.
SHORT = {"mcc": "MCC", "accuracy": "acc", "f1": "F1", "pearson": "P", "spearman": "S", "accuracy_mm": "acc-mm"}
SCHEMA = 1


@dataclass(frozen=True)
class TaskMetrics:
    """One GLUE task as the table shows it: its ``label`` (``STS-B``) and official ``metrics`` in
    order (``("pearson", "spearman")``)."""

    label: str
    metrics: tuple[str, ...]


#: GLUE task name -> how the table shows it.
GlueTasks = Mapping[str, TaskMetrics]


@dataclass(frozen=True)
class Spread:
    """The mean and sample standard deviation (0 for one value) of ``n`` repeats."""

    mean: float
    std: float
    n: int

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        mean = sum(values) / len(values)
        var = sum((v - mean) ** 2 for v in values) / (len(values) - 1) if len(values) > 1 else 0.0
        return cls(mean, math.sqrt(var), len(values))

    def text(self, digits: int = 1) -> str:
        return f"{self.mean:.{digits}f}" + (f" ± {self.std:.{digits}f}" if self.n > 1 else "")


@dataclass(frozen=True)
class RouteRun:
    """One route in one run: the stage it ends as, its metrics (x 100) and its size and throughput
    as multiples of the run's own teacher (None without a teacher)."""

    run_dir: str
    stage: str
    metrics: dict[str, float]
    smaller: float | None
    faster: float | None
    final: bool  # the run's final model (model/)


@dataclass(frozen=True)
class TaskCell:
    """One route on one task over its runs: each official metric and the task's score."""

    task: str
    metrics: dict[str, Spread]
    score: Spread
    runs: list[RouteRun]


@dataclass(frozen=True)
class GlueRow:
    """One model of the table: its cells per task, its average over :data:`AVERAGED` (None unless
    it has each), the share of the teacher's average it keeps, and the range over tasks of its
    size and throughput multiples of the teacher."""

    route: str
    cells: dict[str, TaskCell]
    average: float | None
    retention: float | None
    smaller: tuple[float, float] | None
    faster: tuple[float, float] | None


@dataclass(frozen=True)
class GlueTable:
    """The table: its tasks in column order, its rows (the teacher first), the runs read and the
    ``results.json`` files left out with why."""

    tasks: list[str]
    rows: list[GlueRow]
    runs: dict[str, list[str]]  # task -> run dirs
    specs: dict[str, TaskMetrics]  # the tasks shown and the averaged ones (their labels name the average)
    skipped: dict[str, str] = field(default_factory=dict)


def routes_of(record: RunRecord) -> dict[str, StageRecord]:
    """Each route of the run (its stage names before the first dot) and the last stage it reaches,
    in the record's order; the teacher is the route ``teacher``."""
    ends: dict[str, StageRecord] = {}
    for stage in record.stages:
        ends[stage.name.split(".", 1)[0]] = stage
    return ends


def _ratio(num: float, den: float) -> float | None:
    return num / den if num > 0 and den > 0 else None


def route_runs(record: RunRecord, run_dir: Path) -> dict[str, RouteRun]:
    """Each route of one run as a :class:`RouteRun` (its metrics x 100, its multiples of the run's
    own teacher); a metric recorded as null, NaN or infinite is left out, so its cell is blank."""
    teacher = record.teacher
    out = {}
    for route, stage in routes_of(record).items():
        smaller = _ratio(teacher.disk_bytes, stage.disk_bytes) if teacher else None
        faster = _ratio(stage.throughput_sent_per_s, teacher.throughput_sent_per_s) if teacher else None
        measured = {k: 100 * float(v) for k, v in stage.metrics.items() if v is not None and math.isfinite(v)}
        out[route] = RouteRun(str(run_dir), stage.name, measured, smaller, faster,
                              stage.name == record.info.final_model)
    return out


def task_cell(task: str, names: tuple[str, ...], runs: list[RouteRun]) -> TaskCell | None:
    """The route's cell on ``task`` (official metrics ``names``) over its runs; None where a run
    lacks one of them (:func:`read_runs` leaves such runs out and names them)."""
    if any(name not in r.metrics for r in runs for name in names):
        return None
    metrics = {name: Spread.of([r.metrics[name] for r in runs]) for name in names}
    score = Spread.of([sum(r.metrics[name] for name in names) / len(names) for r in runs])
    return TaskCell(task, metrics, score, runs)


def _span(values: list[float | None]) -> tuple[float, float] | None:
    return (min(values), max(values)) if values and all(v is not None for v in values) else None  # type: ignore[type-var]


def _row(route: str, cells: dict[str, TaskCell], teacher_average: float | None) -> GlueRow:
    average = (sum(cells[t].score.mean for t in AVERAGED) / len(AVERAGED)
               if all(t in cells for t in AVERAGED) else None)
    retention = average / teacher_average if average is not None and teacher_average else None
    runs = [r for c in cells.values() for r in c.runs]
    return GlueRow(route, cells, average, retention, _span([r.smaller for r in runs]),
                   _span([r.faster for r in runs]))


def read_runs(found: FoundRuns, glue: GlueTasks) -> tuple[dict[str, dict[str, list[RouteRun]]],
                                                          dict[str, list[str]], dict[str, str]]:
    """The GLUE runs among ``found``: per task, per route, its runs; the run dirs per task; and
    what was left out with why (``found.skipped``, then each ``results.json`` of another task or
    that cannot be read)."""
    by_task: dict[str, dict[str, list[RouteRun]]] = {}
    runs: dict[str, list[str]] = {}
    skipped: dict[str, str] = dict(found.skipped)
    for run_dir in found.runs:
        try:
            record = RunRecord.load(run_dir / RESULTS)
        except IsADirectoryError:
            skipped[str(run_dir / RESULTS)] = "unreadable: a folder, not a file"
            continue
        except OSError as exc:
            skipped[str(run_dir / RESULTS)] = f"unreadable: {exc.strerror or exc}"
            continue
        except (ValueError, TypeError, KeyError) as exc:
            skipped[str(run_dir / RESULTS)] = f"unreadable: {exc}"
            continue
        if record.task not in glue:
            skipped[str(run_dir / RESULTS)] = f"task {record.task!r} is not a GLUE task"
            continue
        runs.setdefault(record.task, []).append(str(run_dir))
        for route, run in route_runs(record, run_dir).items():
            lacking = [m for m in glue[record.task].metrics if m not in run.metrics]
            if lacking:  # the route's other runs still make its cell, with this one named
                skipped[f"{run_dir} ({route})"] = f"no {', '.join(lacking)} recorded (null or NaN)"
                continue
            by_task.setdefault(record.task, {}).setdefault(route, []).append(run)
    return by_task, runs, skipped


def glue_table(paths: list[Path], glue: GlueTasks) -> GlueTable:
    """The table of every run of a ``glue`` task at or under ``paths``; raises ``TinyplmError`` when
    there is none (naming what was found instead)."""
    by_task, runs, skipped = read_runs(find_runs(paths), glue)
    if not by_task:
        found = "; ".join(f"{k}: {v}" for k, v in skipped.items()) or "no results.json"
        raise TinyplmError(f"no finished GLUE run under {', '.join(map(str, paths))} ({found})")
    tasks = [t for t in ORDER if t in by_task]
    routes = list(dict.fromkeys(r for t in tasks for r in by_task[t]))
    routes.sort(key=lambda r: r != "teacher")  # the teacher first, the rest as the recipes list them
    cells = {r: {t: c for t in tasks if r in by_task[t] and (c := task_cell(t, glue[t].metrics, by_task[t][r]))
                 is not None} for r in routes}
    teacher = _row("teacher", cells["teacher"], None) if "teacher" in cells else None
    rows = [_row(r, cells[r], teacher.average if teacher else None) for r in routes]
    return GlueTable(tasks, rows, runs, {t: glue[t] for t in (*tasks, *AVERAGED) if t in glue}, skipped)


def header(table: GlueTable) -> list[str]:
    """The table's column heads: model, one per task (its metrics, WNLI marked apart), then the
    average, its retention and the two multiples."""
    heads = ["model"]
    for t in table.tasks:
        spec = table.specs[t]
        apart = "" if t in AVERAGED else " (apart)"
        heads.append(f"{spec.label} {'/'.join(SHORT.get(m, m) for m in spec.metrics)}{apart}")
    return [*heads, "avg", "of teacher", "x smaller", "x teacher sent/s"]


def _range(span: tuple[float, float] | None) -> str:
    if span is None:
        return "—"
    low, high = span
    return f"{low:.1f}x" if round(low, 1) == round(high, 1) else f"{low:.1f}-{high:.1f}x"


def row_cells(row: GlueRow, tasks: list[str]) -> list[str]:
    """One row as text: each task's metrics (mean ± std over its runs, /-separated), a ``*`` after
    the cell where the route ends as the run's final model in every run."""
    cells = [row.route]
    for t in tasks:
        cell = row.cells.get(t)
        if cell is None:
            cells.append("—")
            continue
        final = "*" if all(r.final for r in cell.runs) else ""
        cells.append(" / ".join(s.text() for s in cell.metrics.values()) + final)
    cells.append(f"{row.average:.1f}" if row.average is not None else "—")
    cells.append(f"{row.retention:.1%}" if row.retention is not None else "—")
    return [*cells, _range(row.smaller), _range(row.faster)]


def markdown(table: GlueTable) -> str:
    """The table as markdown with what it shows under it."""
    heads = header(table)
    lines = ["| " + " | ".join(heads) + " |", "|:---|" + "---:|" * (len(heads) - 1)]
    lines += ["| " + " | ".join(row_cells(r, table.tasks)) + " |" for r in table.rows]
    runs = ", ".join(f"{table.specs[t].label} {len(table.runs[t])}" for t in table.tasks)
    averaged = ", ".join(table.specs[t].label if t in table.specs else t for t in AVERAGED)
    lines += ["", f"Runs per task (each a seed): {runs}. Metrics x 100 on each task's dev split, mean ± sample "
              f"standard deviation over the runs. avg: the mean over {averaged}"
              " of each task's score (the mean of its metrics); only a model with all five has one. "
              "x smaller / x teacher sent/s: the teacher's size on disk over the model's, the model's batch "
              "throughput over the teacher's timed in the same run; the range over runs. "
              "*: the final model (model/) of every run of the task."]
    if table.skipped:
        lines += ["", "Left out: " + "; ".join(f"{k} ({v})" for k, v in table.skipped.items()) + "."]
    return "\n".join(lines) + "\n"


def write_files(out_dir: Path, files: dict[str, str]) -> None:
    """Write each ``{name: text}`` into ``out_dir`` (made if missing), atomically, in order; raises
    ``TinyplmError`` naming the file that cannot be written."""
    path = out_dir
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            path = out_dir / name
            write_atomic(path, text)
    except OSError as exc:
        raise TinyplmError(f"{path}: cannot be written ({exc.strerror or exc}); choose another --out") from None


def write_glue_table(table: GlueTable, out_dir: Path) -> Path:
    """Write ``glue.json`` and ``glue.md`` into ``out_dir`` (atomically); returns the JSON's path.
    Raises ``TinyplmError`` naming a file that cannot be written."""
    data = {"schema": SCHEMA, "tasks": table.tasks, "averaged": list(AVERAGED), "runs": table.runs,
            "specs": {t: asdict(spec) for t, spec in table.specs.items()},
            "skipped": table.skipped, "rows": [asdict(r) for r in table.rows]}
    write_files(out_dir, {"glue.json": json.dumps(data, indent=2) + "\n", "glue.md": markdown(table)})
    return out_dir / "glue.json"
