"""``tinyplm report`` given something other than a finished run dir says what it was given and
what to do: a missing folder, a recipe, an unfinished run (the command that continues it), a
sweep's folder (its own table, and a trial dir to report on)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers_cli import assert_bad_input, cli


def assert_said(tmp_path: Path, target: str, *fragments: str) -> str:
    """Run ``tinyplm report TARGET`` in ``tmp_path``; it must fail in one line holding each fragment
    and never name the code's own classes."""
    result = cli(["report", target], tmp_path)
    assert_bad_input(result, *fragments)
    assert "RunRecord" not in result.stderr and "to_dict" not in result.stderr, result.stderr
    return result.stderr


def test_a_missing_folder_is_said_as_such(tmp_path: Path) -> None:
    stderr = assert_said(tmp_path, "runs/nope", "runs/nope: no such folder")
    assert "file not found" not in stderr


def test_a_recipe_given_is_told_report_takes_a_run_dir(tmp_path: Path) -> None:
    (tmp_path / "recipe.yaml").write_text("task:\n  name: sst2\n", encoding="utf-8")
    assert_said(tmp_path, "recipe.yaml", "recipe.yaml: is a recipe", "report takes a run dir")


def test_an_unfinished_run_is_told_how_to_continue(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "killed"
    run.mkdir(parents=True)
    (run / "config.resolved.yaml").write_text("name: x\n", encoding="utf-8")
    assert_said(tmp_path, "runs/killed", "runs/killed: unfinished",
          "tinyplm run runs/killed/config.resolved.yaml -o runs/killed --resume")


def test_a_finished_pretraining_run_is_not_called_unfinished(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "mlm"
    run.mkdir(parents=True)
    (run / "config.resolved.yaml").write_text("name: mlm\n", encoding="utf-8")
    (run / "pretrain.json").write_text("{}", encoding="utf-8")
    stderr = assert_said(tmp_path, "runs/mlm", "runs/mlm: is a pre-training run, its results in runs/mlm/pretrain.json")
    assert "unfinished" not in stderr and "--resume" not in stderr


def test_a_sweep_folder_points_to_its_table_and_a_trial(tmp_path: Path) -> None:
    sweep = tmp_path / "sweeps" / "s"
    (sweep / "trials" / "t-0123456789").mkdir(parents=True)
    (sweep / "sweep.json").write_text(json.dumps({"schema": 1, "trials": []}), encoding="utf-8")
    assert_said(tmp_path, "sweeps/s", "sweeps/s: is a sweep's folder", "sweeps/s/sweep.json", "summary.md",
          "sweeps/s/trials/t-0123456789")


def test_a_plain_folder_still_names_the_missing_results_json(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert_said(tmp_path, "empty", "empty/results.json: file not found; expected a results.json")


def _finished(run: Path) -> Path:
    """``run`` holding a minimal finished run's results.json (a teacher alone)."""
    from tinyplm.report import RunRecord, StageRecord

    teacher = StageRecord(name="teacher", metrics={"accuracy": 0.9}, params=100, params_no_embeddings=50,
                          disk_bytes=400, latency_ms_p50_b1=1.0, latency_ms_p90_b1=1.2, throughput_sent_per_s=10.0)
    run.mkdir(parents=True)
    RunRecord(task="sst2", metric="accuracy", stages=[teacher]).save(run / "results.json")
    return run


def test_a_report_file_that_cannot_be_written_is_named_without_a_traceback(tmp_path: Path) -> None:
    """A folder where plots/throughput.png goes (or a full disk) gave an IsADirectoryError traceback
    naming a temporary file."""
    run = _finished(tmp_path / "runs" / "done")
    (run / "plots" / "throughput.png").mkdir(parents=True)
    stderr = assert_said(tmp_path, "runs/done", "runs/done/plots/throughput.png: cannot write this report file")
    assert ".tmp" not in stderr


def test_a_run_dir_nothing_can_be_written_in_is_refused_before_any_file(tmp_path: Path, monkeypatch) -> None:
    """A run dir on a read-only mount (copied from a colleague's): said at once, no file touched
    (root, which runs the tests, can write anywhere: the probe is made to say read-only)."""
    import tinyplm.report as report
    from tinyplm.errors import TinyplmError

    run = _finished(tmp_path / "done")
    monkeypatch.setattr(report, "write_problem", lambda folder: "Read-only file system")
    with pytest.raises(TinyplmError, match=r"nothing can be written in it \(Read-only file system\); copy the run dir"):
        report.rebuild(run)
    assert sorted(p.name for p in run.iterdir()) == ["results.json"]
