"""One precision rule for measurement: what ``auto`` means is the CPU's or the TINYPLM_BF16 switch's
choice, but every reported metric, dev check and teacher logit runs in a named precision (fp32 by
default), so the same model reports the same figures on every CPU. results.json says which."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import TINY_TRAIN, make_tiny_glue, make_tiny_model_dir, tiny_recipe
from tinyplm import tasks
from tinyplm.config import validate_recipe
from tinyplm.config.schema import MeasureSpec
from tinyplm.evaluate.model_eval import encode_evals, evaluate_model
from tinyplm.models import load_classifier, shape_of
from tinyplm.models.infer import BF16_SWITCH, cpu_supports_bf16, forced_bf16, precision_facts, use_bf16
from tinyplm.report import RunRecord
from tinyplm.report.records import StageKind
from tinyplm.report.run_info import RunPrecision
from tinyplm.run import run_or_reuse
from tinyplm.run.measure import measure_stages
from tinyplm.run.results import StageResult

SPEC = MeasureSpec(latency_sentences=4, throughput_sentences=16, rounds=1, warmup=0)


@pytest.mark.parametrize(("value", "bf16"), [("on", True), ("ON", True), ("1", True), ("off", False), ("0", False)])
def test_the_switch_decides_what_auto_means(monkeypatch: pytest.MonkeyPatch, value: str, bf16: bool) -> None:
    monkeypatch.setenv(BF16_SWITCH, value)
    assert forced_bf16() is bf16
    assert use_bf16("auto") is bf16
    assert use_bf16("fp32") is False and use_bf16("bf16") is True  # named precisions are never switched
    assert precision_facts()["auto_means"] == ("bf16" if bf16 else "fp32")


def test_without_the_switch_the_cpu_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BF16_SWITCH, raising=False)
    assert forced_bf16() is None
    assert use_bf16("auto") is cpu_supports_bf16()
    assert precision_facts()["bf16_switch"] is None


def test_a_bad_switch_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BF16_SWITCH, "maybe")
    with pytest.raises(ValueError, match=f"{BF16_SWITCH}='maybe': expected on or off"):
        use_bf16("auto")
    with pytest.raises(ValueError, match="precision 'fp16'"):
        use_bf16("fp16")


def _stage(tmp_path: Path):
    data = tasks.get("sst2", make_tiny_glue(tmp_path / "glue", n_train=8, n_dev=40)).load()
    model, tok = load_classifier(make_tiny_model_dir(tmp_path / "m"), data.labels, False)
    evals = encode_evals(data, tok, 32)
    return data, model, evals, StageResult("teacher", model, "m", StageKind.TEACHER, shape_of(model))


@pytest.mark.parametrize("switch", ["on", "off"])
def test_stage_metrics_are_fp32_whatever_auto_means(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    switch: str) -> None:
    monkeypatch.setenv(BF16_SWITCH, switch)
    data, model, evals, stage = _stage(tmp_path)
    (record,) = measure_stages([stage], tmp_path, data, evals, SPEC)
    assert record.metrics == evaluate_model(model, data, evals, bf16=False)  # exactly: the same computation
    assert record.metric_precision == "fp32"


def test_stage_metrics_in_bf16_when_the_recipe_names_it(tmp_path: Path) -> None:
    data, model, evals, stage = _stage(tmp_path)
    (record,) = measure_stages([stage], tmp_path, data, evals, SPEC.model_copy(update={"precision": "bf16"}))
    assert record.metrics == evaluate_model(model, data, evals, bf16=True)
    assert record.metric_precision == "bf16"
    assert record.precision == "fp32"  # what the timed model runs in is still recorded apart


def test_measurement_precision_must_be_named() -> None:
    raw = {"task": {"name": "sst2"}, "measure": {"precision": "auto"}}
    with pytest.raises(Exception, match="measure.precision"):
        validate_recipe(raw, source="test")
    with pytest.raises(Exception, match="eval_precision"):
        validate_recipe({"task": {"name": "sst2"}, "teacher": {"finetune": {"eval_precision": "auto"}}}, source="test")


def test_results_json_records_every_precision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the switch on, a teacher fine-tuned in ``auto`` trains in bf16 on any CPU; its dev checks,
    the reported metrics and results.json's account of them stay fp32."""
    monkeypatch.setenv(BF16_SWITCH, "on")
    finetune = {**TINY_TRAIN, "precision": "auto", "epochs": 1, "eval_every": 4}
    raw = tiny_recipe(tmp_path, make_tiny_model_dir(tmp_path / "t"), make_tiny_glue(tmp_path / "g", 32, 16),
                      teacher={"model": str(tmp_path / "t"), "finetune": finetune})
    cfg = validate_recipe(raw, source="test")
    run_or_reuse(cfg)
    record = RunRecord.load(Path(cfg.output_dir) / "results.json")
    assert record.info.precision == RunPrecision(metrics="fp32", teacher_logits="fp32")
    assert record.info.machine.bf16_switch == "on" and record.info.machine.auto_means == "bf16"
    teacher = record.teacher
    assert teacher.info.training[0].precision == "bf16" and teacher.info.training[0].eval_precision == "fp32"
    assert teacher.metric_precision == "fp32"
    data = tasks.get("sst2", str(tmp_path / "g")).load()
    model, tok = load_classifier(Path(cfg.output_dir) / "teacher", data.labels, False)
    assert teacher.metrics == evaluate_model(model, data, encode_evals(data, tok, 32))  # as `tinyplm evaluate`
