"""What a tracked run sends: flattened parameters, curve points from log events, final numbers."""

from __future__ import annotations

from pathlib import Path

from tinyplm.report import RunRecord, StageRecord
from tinyplm.report.records import StageKind
from tinyplm.report.run_info import RunInfo
from tinyplm.track.points import (
    MAX_PARAM_VALUE,
    event_points,
    flatten_params,
    record_points,
    record_tags,
    run_artifacts,
)


def test_the_recipe_flattens_to_dotted_keys_within_mlflow_limits() -> None:
    params = flatten_params({
        "name": "tiny", "task": {"name": "sst2", "max_train_examples": None},
        "teacher": {"finetune": {"lr": 3e-5, "keep_best": True}},
        "students": [{"teacher_layers": [1, 3], "compress": [{"kind": "prune_heads"}]}],
        "note": "x" * (MAX_PARAM_VALUE + 10),
    })
    assert params["name"] == "tiny" and params["task.name"] == "sst2"
    assert params["task.max_train_examples"] == "null"
    assert params["teacher.finetune.lr"] == "3e-05" and params["teacher.finetune.keep_best"] == "true"
    assert params["students.0.teacher_layers"] == "[1, 3]"  # a list of plain values is one value
    assert params["students.0.compress.0.kind"] == "prune_heads"  # a list of sections is walked
    assert len(params["note"]) == MAX_PARAM_VALUE


def test_train_and_eval_events_become_curve_points_under_their_stage() -> None:
    train = {"stage": "student-x/stage-0", "time": 1700000000.5, "event": "train", "step": 20, "loss": 0.5,
             "lr": 1e-4, "examples_per_s": 90.0, "elapsed_s": 3.0}
    got = {(p.key, p.value, p.step) for p in event_points(train)}
    assert got == {("student-x/stage-0/train/loss", 0.5, 20), ("student-x/stage-0/train/lr", 1e-4, 20),
                   ("student-x/stage-0/train/examples_per_s", 90.0, 20)}
    assert event_points(train)[0].timestamp_ms == 1700000000500
    dev = {"stage": "teacher", "time": 1.0, "event": "eval", "step": 40,
           "metrics": {"accuracy": 0.75, "note": "text", "f1": float("nan")}, "best": True}
    assert [(p.key, p.value) for p in event_points(dev)] == [("teacher/dev/accuracy", 0.75)]
    for other in ({"stage": "teacher", "event": "checkpoint", "step": 40, "path": "step-40"},
                  {"stage": "augment", "event": "progress", "done": 3}, {"event": "train", "loss": 1.0}):
        assert event_points(other) == []


def _record() -> RunRecord:
    teacher = StageRecord("teacher", {"accuracy": 0.9}, params=1000, params_no_embeddings=600, disk_bytes=4000,
                          latency_ms_p50_b1=2.0, latency_ms_p90_b1=3.0, throughput_sent_per_s=100.0,
                          model_dir="teacher", kind=StageKind.TEACHER)
    student = StageRecord("small", {"accuracy": 0.88}, params=500, params_no_embeddings=100, disk_bytes=2000,
                          latency_ms_p50_b1=1.0, latency_ms_p90_b1=1.5, throughput_sent_per_s=250.0,
                          model_dir="students/small")
    return RunRecord("sst2", "accuracy", [teacher, student],
                     RunInfo(seconds=12.5, final_model="small", final_rule="fastest", run_dir="runs/t"))


def test_every_stage_reports_its_final_metric_size_speed_and_ratios() -> None:
    points = {p.key: p.value for p in record_points(_record(), 5)}
    assert points["teacher/final/accuracy"] == 0.9 and points["small/final/accuracy"] == 0.88
    assert points["small/size/params"] == 500 and points["small/size/disk_bytes"] == 2000
    assert points["small/speed/latency_ms_p50_b1"] == 1.0 and points["small/speed/throughput_sent_per_s"] == 250
    assert points["small/vs_teacher/speedup"] == 2.5 and points["small/vs_teacher/compression"] == 2.0
    assert round(points["small/vs_teacher/retention_pct"], 6) == round(88 / 0.9, 6)
    assert points["final_model/final/accuracy"] == 0.88 and points["run/seconds"] == 12.5
    assert record_tags(_record()) == {"tinyplm.task": "sst2", "tinyplm.metric": "accuracy",
                                      "tinyplm.run_dir": "runs/t", "tinyplm.final_model": "small",
                                      "tinyplm.final_rule": "fastest"}


def test_artifacts_are_the_report_files_present(tmp_path: Path) -> None:
    for name in ("results.json", "summary.md", "logs/train.jsonl"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}")
    (tmp_path / "model").mkdir()
    assert [a.name for a in run_artifacts(tmp_path)] == ["summary.md", "results.json", "logs/train.jsonl", "model"]
