"""The embedding task end to end in a tiny world: a tiny sentence-transformers teacher, STS-B and
SQuAD in the official layouts, a layer student and a student of another checkpoint distilled on the
teacher's vectors, pruned and trimmed, every stage measured on Spearman and nDCG@10 beside the
teacher; the saved stages load in sentence-transformers with the vectors tinyplm gives."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from helpers_doc_world import write_tiny_data
from helpers_embedding import make_sentence_dir
from tinyplm.config import load_recipe
from tinyplm.run import run

pytestmark = pytest.mark.slow

SHORT = {"epochs": 1, "max_steps": 6, "batch_size": 8, "lr": 1e-3, "eval_every": 3, "checkpoint_every": 3,
         "weight_decay": 0.0}


def _recipe(tmp_path: Path, students: list[dict], **task) -> Path:
    data = tmp_path / "data"
    write_tiny_data(data)
    teacher = make_sentence_dir(tmp_path / "teacher")
    recipe = {"name": "emb", "output_dir": str(tmp_path / "runs" / "{name}"), "cache_dir": str(tmp_path / "cache"),
              "task": {"name": "embedding", "data_dir": str(data), "max_length": 32, "eval_max_length": 48,
                       "holdout": 8, **task},
              "teacher": {"model": str(teacher)}, "students": students,
              "measure": {"latency_sentences": 4, "throughput_sentences": 16, "rounds": 1, "warmup": 0},
              "final": {"rule": "fastest", "min_retention": 0.5}}
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    return path


def test_layer_student_pruned_and_trimmed_is_measured_on_embedding_metrics(tmp_path: Path) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    students = [{"name": "student-L1", "teacher_layers": [1], "objective": {"vector_mse": 16.0, "similarity_kd": 1.0},
                 "train": SHORT,
                 "compress": [{"kind": "prune_heads", "keep": 0.5}, {"kind": "trim_vocab"}]}]
    cfg = load_recipe(_recipe(tmp_path, students))
    record = run(cfg)
    stages = {s.name: s for s in record.stages}
    assert set(stages) == {"teacher", "student-L1", "student-L1.prune_heads", "student-L1.trim_vocab"}
    for stage in stages.values():
        assert {"spearman", "ndcg_at_10", "spearman_holdout"} <= set(stage.metrics), stage.name
        assert -100 <= stage.metrics["spearman"] <= 100 and 0 <= stage.metrics["ndcg_at_10"] <= 100
    run_dir = Path(cfg.output_dir.replace("{name}", cfg.name))
    assert (run_dir / "model" / "modules.json").is_file()
    results = json.loads((run_dir / "results.json").read_text())
    assert results["metric"] == "spearman"
