"""benchmarks/student_families.py end to end on a tiny teacher and a toy SST-2: one row per
architecture, each student saved, reloaded with identical logits and measured; last line the JSON."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

from conftest import make_tiny_glue, make_tiny_model_dir

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "student_families.py"


def test_student_families_benchmark_runs(tmp_path, monkeypatch, capsys):
    teacher = make_tiny_model_dir(tmp_path / "teacher")
    glue = make_tiny_glue(tmp_path / "glue", n_train=64, n_dev=16)
    argv = [str(SCRIPT), "--teacher", str(teacher), "--task", "sst2", "--data-dir", str(glue),
            "--shape", "1,16,2,24", "--max-steps", "2", "--eval-every", "1", "--batch-size", "8",
            "--max-length", "16", "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out")]
    monkeypatch.setattr(sys, "argv", argv)
    runpy.run_path(str(SCRIPT), run_name="__main__")
    path = Path(capsys.readouterr().out.strip().splitlines()[-1])
    result = json.loads(path.read_text())
    rows = {r["arch"]: r for r in result["rows"]}
    assert set(rows) == {"bert", "roberta", "deberta"}
    assert rows["deberta"]["class"] == "DebertaV2ForSequenceClassification"
    assert all(r["reload_identical"] and r["steps"] == 2 and r["params"] > 0 for r in rows.values())
    assert rows["bert"]["gap_points"] == 0.0 and all(r["throughput_b32"] > 0 for r in rows.values())
