"""The GLUE table across runs (``tinyplm glue-table``): routes, seeds as mean ± std, the average
over the five averaged tasks, WNLI apart, and runs of other tasks left out by name."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyplm.errors import TinyplmError
from tinyplm.report.glue_table import AVERAGED, Spread, TaskMetrics, markdown, row_cells
from tinyplm.report.glue_table import glue_table as table_of
from tinyplm.report.records import RunRecord, StageKind, StageRecord
from tinyplm.report.run_info import RunInfo
from tinyplm.tasks.glue import GLUE_SPECS

GLUE = {name: TaskMetrics(spec.folder, spec.metrics) for name, spec in GLUE_SPECS.items()}


def glue_table(paths: list[Path]):
    """The table with GLUE's tasks as the CLI passes them."""
    return table_of(paths, GLUE)


def _stage(name: str, metrics: dict[str, float], disk: int, speed: float, kind=StageKind.STUDENT,
           parent: str | None = None) -> StageRecord:
    return StageRecord(name=name, metrics=metrics, disk_bytes=disk, throughput_sent_per_s=speed, kind=kind,
                       parent=parent, compress_step="runtime" if parent else None)


def _metrics(task: str, value: float) -> dict[str, float]:
    """Every official metric of ``task`` at ``value``, the second one a little lower."""
    return {m: value - 0.01 * i for i, m in enumerate(GLUE_SPECS[task].metrics)}


def write_run(root: Path, task: str, seed: int, teacher: float, student: float,
              final: str = "student-minilm.runtime") -> Path:
    """A finished GLUE run: teacher, teacher-best.runtime, student-minilm and two compressed stages
    of it (the last its final model unless ``final`` names another stage)."""
    run = root / f"{task}-{seed}"
    stages = [
        _stage("teacher", _metrics(task, teacher), 400_000, 40.0, StageKind.TEACHER),
        _stage("teacher-best", _metrics(task, teacher), 400_000, 40.0),
        _stage("teacher-best.runtime", _metrics(task, teacher - 0.002), 100_000, 160.0, parent="teacher-best"),
        _stage("student-minilm", _metrics(task, student + 0.01), 90_000, 300.0),
        _stage("student-minilm.trim_vocab", _metrics(task, student + 0.01), 50_000, 310.0, parent="student-minilm"),
        _stage("student-minilm.runtime", _metrics(task, student), 12_500 + seed, 1200.0 + seed,
               parent="student-minilm.trim_vocab"),
    ]
    record = RunRecord(task, GLUE_SPECS[task].metrics[0], stages,
                       RunInfo(run_name=run.name, final_model=final))
    run.mkdir(parents=True)
    record.save(run / "results.json")
    return run


def test_routes_seeds_and_the_average(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep" / "trials"
    scores = {"cola": (0.60, [0.55]), "sst2": (0.92, [0.90]), "mrpc": (0.90, [0.88, 0.87, 0.89]),
              "stsb": (0.88, [0.86, 0.85]), "rte": (0.70, [0.66, 0.64, 0.65]), "wnli": (0.56, [0.56])}
    for task, (teacher, students) in scores.items():
        for seed, student in enumerate(students):
            write_run(sweep, task, seed, teacher, student)
    other = tmp_path / "sweep" / "conll"
    other.mkdir()
    RunRecord("conll2003", "f1", [_stage("teacher", {"f1": 0.9}, 1, 1.0, StageKind.TEACHER)]).save(
        other / "results.json")

    table = glue_table([tmp_path / "sweep"])

    assert table.tasks == ["cola", "sst2", "mrpc", "stsb", "rte", "wnli"]
    assert [r.route for r in table.rows] == ["teacher", "teacher-best", "student-minilm"]
    left_out = str(other / "results.json")
    assert list(table.skipped) == [left_out] and "conll2003" in table.skipped[left_out]
    student = table.rows[2]
    assert student.cells["rte"].runs[0].stage == "student-minilm.runtime"
    rte = student.cells["rte"].metrics["accuracy"]
    assert rte.n == 3 and rte.mean == pytest.approx(100 * statistics.mean(scores["rte"][1]))
    assert rte.std == pytest.approx(100 * statistics.stdev(scores["rte"][1]))
    # a two-metric task's score is the mean of its metrics; the average leaves WNLI out
    mrpc_score = statistics.mean(100 * (s - 0.005) for s in scores["mrpc"][1])
    assert student.cells["mrpc"].score.mean == pytest.approx(mrpc_score)
    expected = statistics.mean(student.cells[t].score.mean for t in AVERAGED)
    assert student.average == pytest.approx(expected)
    teacher = table.rows[0]
    assert teacher.retention == pytest.approx(1.0)
    assert student.retention == pytest.approx(expected / teacher.average)
    # multiples of the run's own teacher, as a range over the runs
    assert student.smaller == pytest.approx((400_000 / 12_502, 400_000 / 12_500))
    assert student.faster == pytest.approx((1200 / 40, 1202 / 40))
    cells = row_cells(student, table.tasks)
    assert cells[table.tasks.index("rte") + 1].endswith("*")  # the final model of each of its runs
    assert "±" in cells[table.tasks.index("rte") + 1] and "±" not in cells[table.tasks.index("cola") + 1]
    text = markdown(table)
    assert "WNLI acc (apart)" in text and "Left out:" in text


def test_a_route_is_marked_final_only_where_every_run_ended_on_it(tmp_path: Path) -> None:
    """RTE's seeds ending on different models mark neither route; CoLA's, all on the teacher's
    runtime, mark it."""
    write_run(tmp_path, "rte", 1, 0.70, 0.64, final="teacher-best.runtime")
    write_run(tmp_path, "rte", 2, 0.70, 0.65)
    for seed in (1, 2):
        write_run(tmp_path, "cola", seed, 0.60, 0.35, final="teacher-best.runtime")

    table = glue_table([tmp_path])

    rows = {r.route: row_cells(r, table.tasks) for r in table.rows}
    rte, cola = table.tasks.index("rte") + 1, table.tasks.index("cola") + 1
    assert not rows["student-minilm"][rte].endswith("*") and not rows["teacher-best"][rte].endswith("*")
    assert rows["teacher-best"][cola].endswith("*") and not rows["student-minilm"][cola].endswith("*")
    assert "final model (model/) of every run of the task" in markdown(table)


def test_a_route_missing_a_task_has_no_average(tmp_path: Path) -> None:
    for task in ("cola", "sst2", "mrpc", "stsb"):  # no RTE
        write_run(tmp_path, task, 0, 0.9, 0.85)
    table = glue_table([tmp_path])
    assert all(r.average is None and r.retention is None for r in table.rows)
    assert row_cells(table.rows[0], table.tasks)[-4] == "—"


def test_the_average_is_named_by_the_tasks_labels_before_all_have_run(tmp_path: Path) -> None:
    write_run(tmp_path, "cola", 0, 0.6, 0.4)
    table = glue_table([tmp_path])
    assert table.tasks == ["cola"]
    footer = markdown(table).split("avg: the mean over ", 1)[1]
    labels = ", ".join(GLUE[t].label for t in AVERAGED)
    assert footer.startswith(labels), footer


def test_nothing_to_tabulate_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(TinyplmError, match="no such run dir"):
        glue_table([tmp_path / "absent"])
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "results.json").write_text("{}", encoding="utf-8")
    with pytest.raises(TinyplmError, match="no finished GLUE run.*unreadable"):
        glue_table([tmp_path])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(min_value=-100, max_value=100, allow_nan=False), min_size=1, max_size=6))
def test_spread_is_the_mean_and_sample_deviation(values: list[float]) -> None:
    spread = Spread.of(values)
    assert spread.n == len(values)
    assert spread.mean == pytest.approx(statistics.mean(values), abs=1e-9)
    assert spread.std == pytest.approx(statistics.stdev(values) if len(values) > 1 else 0.0, abs=1e-6)


def test_the_command_prints_the_table_and_ends_with_its_json(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tinyplm.cli import app

    for task in AVERAGED:
        write_run(tmp_path / "runs", task, 0, 0.9, 0.88)
    result = CliRunner().invoke(app, ["glue-table", str(tmp_path / "runs"), "--out", str(tmp_path / "t")])
    assert result.exit_code == 0, result.output
    path = Path(result.output.strip().splitlines()[-1])
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["tasks"] == list(AVERAGED) and [r["route"] for r in data["rows"]][0] == "teacher"
    assert (tmp_path / "t" / "glue.md").read_text(encoding="utf-8").startswith("| model |")


def test_a_metric_recorded_as_null_or_nan_leaves_its_cell_blank(tmp_path: Path) -> None:
    """results.json may hold a metric as null (its reader accepts it) or NaN: glue-table died with a
    TypeError on null and would have averaged NaN; now that run's cell is blank, the others stay."""
    write_run(tmp_path, "sst2", 0, 0.92, 0.90)
    broken = write_run(tmp_path, "rte", 0, 0.70, 0.66)
    data = json.loads((broken / "results.json").read_text(encoding="utf-8"))
    data["stages"][-1]["metrics"]["accuracy"] = None
    data["stages"][0]["metrics"]["accuracy"] = float("nan")
    (broken / "results.json").write_text(json.dumps(data), encoding="utf-8")
    rows = {r.route: r for r in glue_table([tmp_path]).rows}
    assert "rte" not in rows["student-minilm"].cells and "rte" not in rows["teacher"].cells
    assert "sst2" in rows["student-minilm"].cells


def test_a_run_without_a_metric_leaves_the_others_of_its_cell_and_is_named(tmp_path: Path) -> None:
    """One seed's NaN blanked the cell of every seed of the route, and the table listed nothing
    as left out."""
    write_run(tmp_path / "a", "rte", 0, 0.70, 0.66)
    broken = write_run(tmp_path / "b", "rte", 0, 0.72, 0.68)
    data = json.loads((broken / "results.json").read_text(encoding="utf-8"))
    data["stages"][-1]["metrics"]["accuracy"] = float("nan")
    (broken / "results.json").write_text(json.dumps(data), encoding="utf-8")
    table = glue_table([tmp_path])
    rows = {r.route: r for r in table.rows}
    assert len(rows["student-minilm"].cells["rte"].runs) == 1 and len(rows["teacher"].cells["rte"].runs) == 2
    assert any(str(broken) in where and "no accuracy recorded" in why for where, why in table.skipped.items())
