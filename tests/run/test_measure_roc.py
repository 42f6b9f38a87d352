"""Measuring a stage scores it once per dev pass: for a task scored by ROC AUC the same logits give
its metrics and its ROC curve, equal to what evaluate_model and model_roc compute on their own."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from conftest import make_tiny_glue, make_tiny_model_dir
from tinyplm import tasks
from tinyplm.config.schema import MeasureSpec
from tinyplm.evaluate.model_eval import encode_evals, evaluate_model
from tinyplm.evaluate.roc import model_roc
from tinyplm.models import load_classifier, shape_of
from tinyplm.report.records import StageKind
from tinyplm.run.measure import measure_stages
from tinyplm.run.results import StageResult

SPEC = MeasureSpec(latency_sentences=4, throughput_sentences=16, rounds=1, warmup=0)


@pytest.mark.parametrize("metrics", [("accuracy", "roc_auc"), ("accuracy",)])
def test_stage_metrics_and_roc_come_from_one_pass(tmp_path: Path, metrics: tuple[str, ...]) -> None:
    data = tasks.get("sst2", make_tiny_glue(tmp_path / "glue", n_train=8, n_dev=40)).load()
    data = dataclasses.replace(data, metrics=metrics)  # as a ROC-scored task (the spoilers) declares
    model, tok = load_classifier(make_tiny_model_dir(tmp_path / "m"), data.labels, False)
    evals = encode_evals(data, tok, 32)
    stage = StageResult("teacher", model, "m", StageKind.TEACHER, shape_of(model))
    (record,) = measure_stages([stage], tmp_path, data, evals, SPEC)
    assert record.metrics == pytest.approx(evaluate_model(model, data, evals))
    if "roc_auc" in metrics:
        assert record.info.roc == model_roc(model, data, evals)
        assert record.info.roc.auc == pytest.approx(record.metrics["roc_auc"])
    else:
        assert record.info.roc is None  # no extra curve where the task is not scored by ROC AUC
