"""What ``tinyplm glue-table`` and ``paradigm-table`` read and where they write: each run once however
it is named, a sweep's folder as the trials its sweep.json lists, unfinished runs and unreadable
files left out by name, and ``--out`` refused in one line before any run is read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers_cli import assert_bad_input, cli
from report.test_glue_table import GLUE, write_run
from tinyplm.report.glue_table import glue_table
from tinyplm.report.paradigm_table import paradigm_table
from tinyplm.report.run_finding import find_runs


def _student_rte(table) -> list[str]:
    """The run dirs of the student's RTE cell."""
    return [r.run_dir for r in next(r for r in table.rows if r.route == "student-minilm").cells["rte"].runs]


def table_runs(table) -> list[str]:
    """Every run dir the table read."""
    return [d for dirs in table.runs.values() for d in dirs]


def test_a_run_named_twice_or_through_a_symlink_counts_once(tmp_path: Path) -> None:
    run = write_run(tmp_path / "partial", "rte", 0, 0.70, 0.60)
    write_run(tmp_path / "partial", "rte", 1, 0.70, 0.64)
    (tmp_path / "partial" / "link").symlink_to(run.name)

    twice = glue_table([run, run.resolve(), tmp_path / "partial" / "link"], GLUE)
    assert table_runs(twice) == [str(run)]
    cell = next(r for r in twice.rows if r.route == "student-minilm").cells["rte"]
    assert cell.score.n == 1 and cell.score.std == 0.0

    folder = glue_table([tmp_path / "partial"], GLUE)  # the link beside its run is not a third seed
    assert _student_rte(folder) == [str(run), str(tmp_path / "partial" / "rte-1")]
    assert paradigm_table([run, run.resolve()], GLUE, reference="student-minilm").runs == {"rte": [str(run)]}


def _sweep(root: Path, listed: dict[str, str]) -> Path:
    """A sweep's folder whose sweep.json lists ``listed`` (key -> status)."""
    trials = [{"key": key, "label": "", "values": {}, "status": status, "result": None, "error": None,
               "pareto": False} for key, status in listed.items()]
    root.mkdir(parents=True, exist_ok=True)
    (root / "sweep.json").write_text(json.dumps({"schema": 1, "name": "s", "trials": trials}), encoding="utf-8")
    return root


def test_a_sweep_folder_gives_the_trials_its_sweep_json_lists(tmp_path: Path) -> None:
    sweep = _sweep(tmp_path / "sweep", {"t-new0": "finished", "t-new1": "finished", "t-gone": "not run"})
    trials = sweep / "trials"
    write_run(trials, "rte", 0, 0.70, 0.60).rename(trials / "t-new0")
    write_run(trials, "rte", 1, 0.70, 0.62).rename(trials / "t-new1")
    write_run(trials, "rte", 2, 0.70, 0.10).rename(trials / "t-old")  # an earlier space's, left by --resume

    table = glue_table([sweep], GLUE)

    assert _student_rte(table) == [str(trials / "t-new0"), str(trials / "t-new1")]
    assert "earlier search space" in table.skipped[str(trials / "t-old")]
    assert "not run" in table.skipped[str(trials / "t-gone")]


def test_an_unreadable_sweep_json_reads_every_run_and_says_so(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    write_run(sweep / "trials", "rte", 0, 0.70, 0.60)
    (sweep / "sweep.json").write_text("{not json", encoding="utf-8")
    table = glue_table([sweep], GLUE)
    assert len(_student_rte(table)) == 1 and "unreadable" in table.skipped[str(sweep / "sweep.json")]


def test_an_unfinished_run_is_left_out_by_name_with_how_to_continue_it(tmp_path: Path) -> None:
    write_run(tmp_path, "rte", 0, 0.70, 0.60)
    killed = tmp_path / "rte-1"
    killed.mkdir()
    (killed / "config.resolved.yaml").write_text("name: x\n", encoding="utf-8")

    for table in (glue_table([tmp_path], GLUE), paradigm_table([tmp_path], GLUE, reference="student-minilm")):
        why = table.skipped[str(killed)]
        assert why.startswith("unfinished") and f"tinyplm run {killed / 'config.resolved.yaml'} -o {killed}" in why
        assert table_runs(table) == [str(tmp_path / "rte-0")]


def test_a_results_json_that_is_a_folder_is_left_out_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "run" / "results.json").mkdir(parents=True)
    write_run(tmp_path, "rte", 0, 0.70, 0.60)
    table = glue_table([tmp_path], GLUE)
    assert "a folder" in table.skipped[str(tmp_path / "run" / "results.json")]
    assert find_runs([tmp_path / "rte-0" / "results.json"]).runs == [tmp_path / "rte-0"]


@pytest.mark.parametrize("command", ["glue-table", "paradigm-table"])
def test_out_that_cannot_be_a_folder_is_refused_before_reading(tmp_path: Path, command: str) -> None:
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    (tmp_path / "runs").mkdir()  # no run in it: --out is refused first
    for out, said in (("afile", "afile: is a file"), ("afile/t", "afile: is a file, so the table folder afile/t")):
        assert_bad_input(cli([command, "runs", "--out", out], tmp_path), "--out: ", said)
    if Path("/proc/self").is_dir():  # a folder nothing can be made in, whoever runs the test
        assert_bad_input(cli([command, "runs", "--out", "/proc/gt"], tmp_path), "--out: /proc: nothing can be made")
    assert {p.name for p in tmp_path.iterdir()} - {".tinyplm-cache"} == {"afile", "runs"}  # nothing made


def test_a_run_kept_inside_another_is_found_and_a_pretraining_run_is_no_unfinished_one(tmp_path: Path) -> None:
    """A run kept inside another's folder (a later run reading that one's teacher) was dropped
    without a word once the walk stopped at the outer run's results.json; a finished pre-training
    run (pretrain.json, no results.json) was listed as killed or failed."""
    outer = write_run(tmp_path / "runs", "rte", 0, 0.70, 0.60)
    inner = write_run(outer, "rte", 1, 0.70, 0.64)
    write_run(outer / "students", "rte", 2, 0.70, 0.64)  # the run's own folders are never read as runs
    mlm = tmp_path / "runs" / "mlm"
    mlm.mkdir()
    (mlm / "config.resolved.yaml").write_text("name: mlm\n")
    (mlm / "pretrain.json").write_text("{}")
    found = find_runs([tmp_path / "runs"])
    assert found.runs == [outer, inner] and found.skipped == {}
