"""Label names: a task's names go into the saved config's id2label/label2id, and predict, serve and
evaluate answer with the name (and the class index), not the raw value of the data file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import make_tiny_glue, make_tiny_model_dir, tiny_recipe
from helpers_cli import cli
from tinyplm import tasks
from tinyplm.config import validate_recipe
from tinyplm.inference.model_info import model_info
from tinyplm.inference.predictor import Predictor
from tinyplm.inference.records import TextInput
from tinyplm.run import run_or_reuse
from tinyplm.tasks.glue import GLUE_SPECS

NAMES = {"sst2": ("negative", "positive"), "cola": ("unacceptable", "acceptable"),
         "mrpc": ("not_equivalent", "equivalent"), "qqp": ("not_duplicate", "duplicate"),
         "wnli": ("not_entailment", "entailment"), "rte": ("entailment", "not_entailment"),
         "qnli": ("entailment", "not_entailment"), "mnli": ("contradiction", "entailment", "neutral")}


@pytest.mark.parametrize("task", sorted(NAMES))
def test_glue_tasks_name_their_labels_and_still_read_the_raw_values(task: str) -> None:
    assert tasks.get(task).labels == NAMES[task]
    assert len(GLUE_SPECS[task].labels) == len(NAMES[task])  # what the files hold, mapped in order


def test_a_tiny_sst2_reads_1_as_positive(tmp_path: Path) -> None:
    data = tasks.get("sst2", make_tiny_glue(tmp_path, n_train=16, n_dev=8)).load()
    raw = [line.split("\t")[1] for line in (tmp_path / "SST-2" / "train.tsv").read_text().splitlines()[1:]]
    assert [data.labels[e.label] for e in data.train.examples] == [("negative", "positive")[int(r)] for r in raw]


@pytest.fixture(scope="module")
def sst2_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished tiny SST-2 run: its teacher fine-tuned and saved."""
    tmp = tmp_path_factory.mktemp("labels")
    finetune = {"batch_size": 16, "lr": 3.0e-3, "precision": "fp32", "epochs": 1, "eval_every": 0,
                "checkpoint_every": 0}
    raw = tiny_recipe(tmp, make_tiny_model_dir(tmp / "t"), make_tiny_glue(tmp / "glue", n_train=32, n_dev=16),
                      teacher={"model": str(tmp / "t"), "finetune": finetune})
    cfg = validate_recipe(raw, source="test")
    run_or_reuse(cfg)
    return Path(cfg.output_dir)


def test_the_saved_config_carries_the_names(sst2_run: Path) -> None:
    cfg = json.loads((sst2_run / "teacher" / "config.json").read_text())
    assert cfg["id2label"] == {"0": "negative", "1": "positive"}
    assert cfg["label2id"] == {"negative": 0, "positive": 1}


def test_predict_and_serve_answer_with_the_name_and_the_id(sst2_run: Path) -> None:
    predictor = Predictor.load(sst2_run / "teacher")
    preds = predictor.predict([TextInput("a great fun film", None), TextInput("an awful dull film", None)])
    for p in preds:
        record = p.as_dict()
        assert record["label"] in ("negative", "positive")
        assert record["label"] == ("negative", "positive")[record["label_id"]]
        assert set(record["scores"]) == {"negative", "positive"}
        assert record["label"] == max(record["scores"], key=record["scores"].get)


def test_predict_command_writes_names(sst2_run: Path, tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("a great fun film\nan awful dull film\n", encoding="utf-8")
    result = cli(["predict", str(sst2_run / "teacher"), "-i", str(src)], cwd=tmp_path)
    assert result.returncode == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["label"] for r in rows] == [("negative", "positive")[r["label_id"]] for r in rows]


def test_evaluate_names_the_labels_its_metrics_refer_to(sst2_run: Path, tmp_path: Path) -> None:
    glue = sst2_run.parent.parent / "glue"
    result = cli(["evaluate", str(sst2_run / "teacher"), "--task", "sst2", "--data-dir", str(glue), "--json"],
                 cwd=tmp_path)
    assert result.returncode == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["labels"] == ["negative", "positive"] and shown["precision"] == "fp32"


def test_a_model_saved_with_raw_values_answers_with_names(tmp_path: Path) -> None:
    """A model saved before names were recorded (id2label 0/1) under an SST-2 run still answers
    positive/negative; a model of no known task keeps its own labels."""
    run = tmp_path / "run"
    model = make_tiny_model_dir(run / "model")
    cfg = json.loads((model / "config.json").read_text())
    cfg["id2label"], cfg["label2id"] = {"0": "0", "1": "1"}, {"0": 0, "1": 1}
    (model / "config.json").write_text(json.dumps(cfg))
    (run / "config.resolved.yaml").write_text(yaml.safe_dump({"name": "r", "task": {"name": "sst2"}}))
    assert model_info(run).labels == ("negative", "positive")
    assert model_info(model).labels == ("negative", "positive")  # found through its run dir
    alone = tmp_path / "alone"
    make_tiny_model_dir(alone)
    (alone / "config.json").write_text(json.dumps(cfg))
    assert model_info(alone).labels == ("0", "1")
