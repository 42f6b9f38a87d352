"""benchmarks/finetune_methods.py end to end on a tiny random BERT and a toy SST-2: every cell,
the summary table and plot, reuse of finished cells, and the distillation pair (its JSON's path
is the last line)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import make_tiny_glue, make_tiny_model_dir

pytestmark = pytest.mark.slow
BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "finetune_methods.py"


def _bench(tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    args = [sys.executable, str(BENCH), "--task", "sst2", "--model", str(tmp / "m"), "--data-dir", str(tmp / "glue"),
            "--methods", "full,ulmfit,lora,prompt_tuning", "--unfreeze-every", "1", "--seeds", "2",
            "--budget-minutes", "0.005",
            "--distill-minutes", "0.005", "--eval-every", "2", "--max-length", "32", "--threads", "1",
            "--student-layers", "1", "--out", str(tmp / "out"), *extra]
    return subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=tmp)


def test_benchmark_table_plot_and_distillation(tmp_path: Path) -> None:
    make_tiny_model_dir(tmp_path / "m")
    make_tiny_glue(tmp_path / "glue", n_train=64, n_dev=32)
    res = _bench(tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    path = Path(res.stdout.strip().splitlines()[-1])
    out = json.loads(path.read_text())
    rows = {r["method"]: r for r in out["rows"]}
    assert set(rows) == {"full", "ulmfit", "lora", "prompt_tuning"} and all(r["seeds"] == 2 for r in rows.values())
    assert rows["full"]["percent_of_full"] == 100.0 > rows["lora"]["percent_of_full"] > 0
    assert all(r["peak_rss_mib"] > 0 and r["train_seconds"] > 0 for r in rows.values())
    assert "| lora |" in res.stdout and Path(out["figure"]).stat().st_size > 1000
    assert out["distillation"]["peft_method"] == "lora"
    assert set(out["distillation"]["by_teacher"]) == {"full", "lora"}
    again = _bench(tmp_path, "--no-distill")  # finished cells are reused, not retrained
    assert again.returncode == 0, again.stderr[-3000:]
    assert '"seed"' not in again.stdout.split("| method |")[0]
