"""benchmarks/serve_agreement.py on a tiny run: predict, serve and evaluate agree on every stage."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import serve_agreement
from conftest import make_tiny_glue, make_tiny_model_dir
from tinyplm.report import RunRecord, StageRecord
from tinyplm.report.records import StageKind

pytestmark = pytest.mark.slow


def test_every_saved_stage_is_compared_and_agrees(tmp_path: Path, monkeypatch) -> None:
    run = tmp_path / "run"
    make_tiny_model_dir(run / "teacher", seed=0)
    make_tiny_model_dir(run / "students" / "s", seed=1)
    stages = [StageRecord(name="teacher", metrics={"accuracy": 0.5}, model_dir="teacher", kind=StageKind.TEACHER),
              StageRecord(name="s", metrics={"accuracy": 0.5}, model_dir="students/s"),
              StageRecord(name="gone", metrics={"accuracy": 0.5}, model_dir="students/gone")]
    RunRecord(task="sst2", metric="accuracy", stages=stages).save(run / "results.json")
    glue = make_tiny_glue(tmp_path / "glue", n_train=8, n_dev=24)
    monkeypatch.setattr(sys, "argv", ["serve_agreement.py", str(run), "--data-dir", str(glue), "--max-batch", "4",
                                      "--threads", "1"])
    serve_agreement.main()
    result = json.loads((run / "serve_agreement.json").read_text())
    assert set(result["stages"]) == {"teacher", "s"}  # 'gone' has no saved model
    assert result["examples"] == 24
    for stage in result["stages"].values():
        assert stage["predict_vs_evaluate"]["disagree"] == 0, stage
        assert stage["serve_vs_evaluate"]["disagree"] == 0, stage
        assert stage["server"] == {"exit_code": 0, "non_2xx": 0}


def test_compare_counts_disagreements_by_label_name() -> None:
    got = serve_agreement.compare(["negative", "positive"], [0, 1, 1, 0], ["negative", "negative", "positive", None])
    assert got["disagree"] == 2 and got["first"] == [1, 3] and got["agree_share"] == 0.5
