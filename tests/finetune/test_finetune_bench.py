"""benchmarks/finetune_methods.py end to end on a tiny random BERT and a toy SST-2: every cell,
the summary table and plot, reuse of finished cells, and the distillation pair (its JSON's path
is the last line)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import helpers_warm as warm
from conftest import make_tiny_glue, make_tiny_model_dir

pytestmark = pytest.mark.slow
BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "finetune_methods.py"


def _bench(tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    args = [sys.executable, str(BENCH), "--task", "sst2", "--model", str(tmp / "m"), "--data-dir", str(tmp / "glue"),
            "--methods", "full,ulmfit,lora,prompt_tuning", "--unfreeze-every", "1", "--seeds", "2",
            "--budget-minutes", "0.005",
            "--distill-minutes", "0.005", "--eval-every", "2", "--max-length", "32", "--threads", "1",
            "--student-layers", "1", "--out", str(tmp / "out"), *extra]
    return warm.run(args, capture_output=True, text=True, timeout=300, cwd=tmp)


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
    assert out["distillation"]["teacher_cells"] == []  # the table's seed-0 models
    again = _bench(tmp_path, "--no-distill")  # finished cells are reused, not retrained
    assert again.returncode == 0, again.stderr[-3000:]
    assert '"seed"' not in again.stdout.split("| method |")[0]
    longer = _bench(tmp_path, "--teacher-minutes", "0.01")  # the pair's teachers trained again, longer
    assert longer.returncode == 0, longer.stderr[-3000:]
    pair = json.loads(Path(longer.stdout.strip().splitlines()[-1]).read_text())["distillation"]
    assert pair["teacher_minutes"] == 0.01 and [c["method"] for c in pair["teacher_cells"]] == ["full", "lora"]
    assert (tmp_path / "out" / "sst2" / "teachers-0.01min" / "teachers" / "lora" / "config.json").is_file()
    assert len(list((tmp_path / "out" / "sst2" / "distil").iterdir())) == 4  # a run per teacher's weights


def test_tuning_on_held_out_training_examples(tmp_path: Path) -> None:
    """--holdout scores on a seeded draw of training examples, never on dev, trains on the rest and
    distils nothing; --lr and the LoRA options reach the cell's TrainSpec."""
    make_tiny_model_dir(tmp_path / "m")
    make_tiny_glue(tmp_path / "glue", n_train=64, n_dev=32)
    res = _bench(tmp_path, "--methods", "lora", "--seeds", "1", "--holdout", "16", "--lr", "lora=3e-3",
                 "--lora-r", "2", "--lora-targets", "query,ffn_in")
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(Path(res.stdout.strip().splitlines()[-1]).read_text())
    cell = out["cells"][0]
    assert out["holdout"] == 16 and out["distillation"] is None
    assert set(cell["metrics"]) and all("dev" not in k for k in cell["metrics"])
    assert cell["settings"]["train"]["lr"] == 3e-3 and out["lora"] == {"r": 2, "targets": ["query", "ffn_in"]}
    assert cell["settings"]["train"]["method_options"] == {"r": 2, "targets": ["query", "ffn_in"]}
    bad = _bench(tmp_path, "--holdout", "64")
    assert bad.returncode != 0 and "--holdout must be between 1 and 63" in bad.stderr


def test_hold_out_is_deterministic_and_disjoint() -> None:
    import importlib.util

    from tinyplm.tasks.base import Example, Split, TaskData

    spec = importlib.util.spec_from_file_location("finetune_methods", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    train = Split("train", [Example(f"s{i}", None, i % 2, i + 1) for i in range(50)], Path("train.tsv"))
    data = TaskData("sst2", train, {"dev": Split("dev", [], Path("dev.tsv"))}, ("0", "1"), False,
                    ("accuracy",), "accuracy")
    a, b = bench.hold_out(data, 10), bench.hold_out(data, 10)
    assert [e.text for e in a.evals["heldout"].examples] == [e.text for e in b.evals["heldout"].examples]
    assert list(a.evals) == ["heldout"] and len(a.train) == 40
    assert {e.text for e in a.train.examples}.isdisjoint(e.text for e in a.evals["heldout"].examples)
