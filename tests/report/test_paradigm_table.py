"""The paradigm table across runs (``tinyplm paradigm-table``): each route's score against the
teacher and against the distilled student it starts from, per task, with its speed and size
multiples of the run's own teacher."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyplm.errors import TinyplmError
from tinyplm.report.glue_table import TaskMetrics
from tinyplm.report.paradigm_table import markdown, paradigm_table, row_cells
from tinyplm.report.records import RunRecord, StageKind, StageRecord
from tinyplm.report.run_info import RunInfo
from tinyplm.tasks.glue import GLUE_SPECS

GLUE = {name: TaskMetrics(spec.folder, spec.metrics) for name, spec in GLUE_SPECS.items()}


def _stage(name: str, value: float, task: str, disk: int, speed: float, kind=StageKind.STUDENT,
           parent: str | None = None) -> StageRecord:
    metrics = {m: value - 0.01 * i for i, m in enumerate(GLUE_SPECS[task].metrics)}
    return StageRecord(name=name, metrics=metrics, disk_bytes=disk, throughput_sent_per_s=speed, kind=kind,
                       parent=parent, compress_step=parent and name.rsplit(".", 1)[-1])


def write_run(root: Path, task: str, teacher: float, student: float, variants: dict[str, float],
              seed: int = 0) -> Path:
    """A finished paradigm run: the teacher, the distilled student and one route per variant
    (a compress step each, from the student), variant ``name`` scoring ``variants[name]``."""
    run = root / f"{task}-{seed}"
    stages = [_stage("teacher", teacher, task, 400_000, 40.0, StageKind.TEACHER),
              _stage("student-minilm", student, task, 90_000, 300.0)]
    for i, (name, value) in enumerate(variants.items()):
        stages.append(_stage(name, student, task, 90_000, 300.0))
        stages.append(_stage(f"{name}.step", value, task, 20_000 + i, 600.0 + 100 * i, parent=name))
    record = RunRecord(task, GLUE_SPECS[task].metrics[0], stages, RunInfo(run_name=run.name))
    run.mkdir(parents=True)
    record.save(run / "results.json")
    return run


def test_each_route_against_the_teacher_and_the_student(tmp_path: Path) -> None:
    write_run(tmp_path, "stsb", 0.88, 0.86, {"pruned": 0.84, "ov-int8": 0.859})
    write_run(tmp_path, "sst2", 0.92, 0.90, {"pruned": 0.89})
    write_run(tmp_path, "mrpc", 0.90, 0.88, {"pruned": 0.86, "ov-int8": 0.87})

    table = paradigm_table([tmp_path], GLUE)

    assert table.tasks == ["sst2", "mrpc", "stsb"]  # GLUE's column order, not the order found
    assert [r.route for r in table.rows] == ["teacher", "student-minilm", "pruned", "ov-int8"]
    pruned = table.rows[2].cells["stsb"]
    # STS-B's score is the mean of Pearson and Spearman (the second 0.01 lower here), x 100
    assert pruned.score == pytest.approx(100 * (0.84 - 0.005))
    assert pruned.of_teacher == pytest.approx((0.84 - 0.005) / (0.88 - 0.005))
    assert pruned.of_reference == pytest.approx((0.84 - 0.005) / (0.86 - 0.005))
    assert pruned.stage == "pruned.step"
    assert pruned.faster == pytest.approx(600 / 40) and pruned.smaller == pytest.approx(400_000 / 20_000)
    assert table.rows[0].cells["sst2"].of_teacher == pytest.approx(1.0)
    assert table.rows[1].cells["mrpc"].of_reference == pytest.approx(1.0)
    # a route not run on a task shows dashes there
    cells = row_cells(table.rows[3], table.tasks)
    assert cells[1:4] == ["—", "—", "—"] and cells[4].startswith("86.5 (")  # the mean of F1 and accuracy
    text = markdown(table)
    assert "STS-B (of teacher / of student-minilm)" in text and "Runs per task: SST-2 1, MRPC 1, STS-B 1" in text


def test_runs_of_a_task_are_averaged(tmp_path: Path) -> None:
    write_run(tmp_path, "sst2", 0.92, 0.90, {"sparse": 0.88}, seed=1)
    write_run(tmp_path, "sst2", 0.92, 0.90, {"sparse": 0.86}, seed=2)
    cell = next(r for r in paradigm_table([tmp_path], GLUE).rows if r.route == "sparse").cells["sst2"]
    assert cell.runs == 2 and cell.score == pytest.approx(87.0)


def test_nothing_to_tabulate_and_no_reference_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(TinyplmError, match="no such run dir"):
        paradigm_table([tmp_path / "absent"], GLUE)
    (tmp_path / "conll").mkdir()
    RunRecord("conll2003", "f1", [StageRecord(name="teacher", metrics={"f1": 0.9}, disk_bytes=1,
                                              throughput_sent_per_s=1.0, kind=StageKind.TEACHER)]).save(
        tmp_path / "conll" / "results.json")
    with pytest.raises(TinyplmError, match="no finished run of .*conll2003"):
        paradigm_table([tmp_path], GLUE)
    write_run(tmp_path, "mrpc", 0.9, 0.88, {"pruned": 0.86})
    with pytest.raises(TinyplmError, match="reference route 'student-L3'.*pruned, student-minilm, teacher"):
        paradigm_table([tmp_path], GLUE, reference="student-L3")


@settings(max_examples=30, deadline=None)
@given(teacher=st.floats(0.2, 1.0), student=st.floats(0.1, 1.0), variant=st.floats(0.0, 1.0))
def test_shares_multiply_through_the_student(tmp_path_factory, teacher: float, student: float,
                                             variant: float) -> None:
    """A route's share of the teacher is its share of the student times the student's share of the
    teacher, whatever the scores."""
    root = tmp_path_factory.mktemp("runs")
    write_run(root, "sst2", teacher, student, {"svd": variant})
    rows = {r.route: r.cells["sst2"] for r in paradigm_table([root], GLUE).rows}
    assert rows["svd"].of_teacher == pytest.approx(rows["svd"].of_reference * rows["student-minilm"].of_teacher)


def test_the_command_prints_the_table_and_ends_with_its_json(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tinyplm.cli import app

    for task in ("sst2", "mrpc", "stsb"):
        write_run(tmp_path / "runs", task, 0.9, 0.88, {"pruned": 0.87})
    result = CliRunner().invoke(app, ["paradigm-table", str(tmp_path / "runs"), "--out", str(tmp_path / "t")])
    assert result.exit_code == 0, result.output
    path = Path(result.output.strip().splitlines()[-1])
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["tasks"] == ["sst2", "mrpc", "stsb"] and data["reference"] == "student-minilm"
    assert [r["route"] for r in data["rows"]] == ["teacher", "student-minilm", "pruned"]
    assert (tmp_path / "t" / "paradigms.md").read_text(encoding="utf-8").startswith("| model |")
