"""The report's runtime columns: the teacher on its best runtime, ratios against it, precision and
runtime, effective compute, training curves, and the trained-parameters column."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinyplm.evaluate import compute
from tinyplm.report import write_all
from tinyplm.report.curves import histories
from tinyplm.report.info import CompressInfo, StageInfo, TrainingInfo
from tinyplm.report.records import RunRecord, StageKind, StageRecord
from tinyplm.report.tables import markdown_table, stage_rows, teacher_best

SHAPE = {"layers": 2, "hidden": 32, "heads": 4, "ffn": 64}


def stage(name: str, acc: float, sent_s: float, disk: int, *, kind=StageKind.STUDENT, parent=None, step=None,
          runtime="torch", precision="fp32", info: StageInfo | None = None) -> StageRecord:
    return StageRecord(name=name, metrics={"accuracy": acc}, params=disk // 4, params_no_embeddings=disk // 8,
                       disk_bytes=disk, latency_ms_p50_b1=1.0, latency_ms_p90_b1=1.2, throughput_sent_per_s=sent_s,
                       throughput_batch=32, kind=kind, parent=parent, compress_step=step, shape=SHAPE,
                       runtime=runtime, precision=precision, info=info or StageInfo())


def make_record() -> RunRecord:
    """A teacher (100/s), the teacher in int8 (300/s: its best runtime), a student and its int8 form."""
    return RunRecord("sst2", "accuracy", [
        stage("teacher", 0.90, 100.0, 90_000_000, kind=StageKind.TEACHER),
        stage("teacher-best.openvino_int8", 0.899, 300.0, 30_000_000, kind=StageKind.COMPRESSED, parent="teacher",
              step="openvino_int8", runtime="openvino", precision="int8"),
        stage("student", 0.885, 250.0, 50_000_000),
        stage("student.pruned", 0.884, 500.0, 20_000_000, kind=StageKind.COMPRESSED, parent="student",
              step="prune_ffn"),
        stage("student.openvino_int8", 0.883, 1200.0, 8_000_000, kind=StageKind.COMPRESSED,
              parent="student.pruned", step="openvino_int8", runtime="openvino", precision="int8"),
        stage("student.too-lossy", 0.80, 5000.0, 1_000_000, kind=StageKind.COMPRESSED, parent="student",
              step="openvino_int8", runtime="openvino", precision="int8"),
    ])


def test_teacher_best_is_the_fastest_runtime_variant_of_the_teacher() -> None:
    record = make_record()
    assert teacher_best(record).name == "teacher-best.openvino_int8"
    rows = {r.name: r for r in stage_rows(record)}
    final = rows["student.openvino_int8"]
    assert final.speedup == pytest.approx(12.0) and final.speedup_vs_best == pytest.approx(4.0)
    assert final.compression == pytest.approx(11.25)
    assert (final.runtime, final.precision) == ("openvino", "int8")
    assert "× teacher best" in markdown_table(record) and "openvino int8" in markdown_table(record)
    record.stages[1].compress_step = "prune_heads"  # not a runtime step: not a form of the teacher
    assert teacher_best(record).name == "teacher"


def test_flops_per_token_by_hand() -> None:
    # per layer: QKV+out 2*4*32*32 = 8192, FFN 2*2*32*64 = 8192, attention 2*2*10*32 = 1280
    assert compute.flops_per_token(SHAPE, 32, 10) == pytest.approx(2 * (8192 + 8192 + 1280))
    pruned = {**SHAPE, "heads_per_layer": [2, 4], "ffn_per_layer": [32, 64]}
    assert compute.flops_per_token(pruned, 32, 10) == pytest.approx(
        (2 * 4 * 32 * 16 + 2 * 2 * 32 * 32 + 2 * 2 * 10 * 16) + (8192 + 8192 + 1280))


def test_peak_follows_the_cpu_flags(monkeypatch) -> None:
    flags = frozenset({"fma", "avx2", "avx512f", "amx_int8"})
    monkeypatch.setattr(compute, "cpu_flags_and_clock", lambda: (flags, 2.0))
    assert compute.peak("fp32", 2).flops_per_s == pytest.approx(2 * 2e9 * 64)
    assert compute.peak("int8", 2).flops_per_s == pytest.approx(2 * 2e9 * 2048)
    assert compute.peak("bf16", 1).flops_per_s == pytest.approx(2e9 * 64)  # no bf16 units: fp32's peak
    rate = compute.effective_rate(SHAPE, 32, 10.0, 100.0, "fp32", 2)
    assert rate["gflops_per_s"] == pytest.approx(round(compute.flops_per_token(SHAPE, 32, 10) * 10 * 100 / 1e9, 2))
    assert 0 < rate["share_of_peak"] < 1 and "64 fp32 FLOPs/cycle (avx512f)" in rate["peak_basis"]


def test_training_histories_of_stages_substages_and_recovery(tmp_path: Path) -> None:
    record = make_record()
    record.stages[0].info.training = [TrainingInfo(history=[{"step": 10, "elapsed_s": 60.0, "accuracy": 0.8}])]
    record.stages[2].info.training = [TrainingInfo(stage="general"), TrainingInfo(
        stage="task", history=[{"step": 5, "elapsed_s": 6.0, "accuracy": 0.7}])]
    record.stages[3].info.compress = CompressInfo(
        recover=TrainingInfo(history=[{"step": 1, "elapsed_s": 1.0, "accuracy": 0.88}]))
    assert [label for label, _ in histories(record)] == ["teacher", "student/task", "student.pruned/recover"]
    written = write_all(record, tmp_path)
    assert written["training"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (tmp_path / "report.html").read_text()
    assert "Dev metric over training time" in html and "'step': 10" not in html  # drawn, not dumped


def test_trained_column_covers_recovery_training_and_leaves_untrained_stages_blank() -> None:
    record = RunRecord("sst2", "accuracy", [
        stage("teacher", 0.90, 100.0, 90_000_000, kind=StageKind.TEACHER,
              info=StageInfo(training=[TrainingInfo(trainable_params=22_000_000, trainable_share=1.0)])),
        stage("student.pruned", 0.884, 500.0, 20_000_000, kind=StageKind.COMPRESSED, parent="teacher",
              step="prune_ffn", info=StageInfo(compress=CompressInfo(recover=TrainingInfo(
                  steps=10, trainable_params=3_000_000, trainable_share=0.5)))),
        stage("student.openvino_int8", 0.883, 1200.0, 8_000_000, kind=StageKind.COMPRESSED,
              parent="student.pruned", step="openvino_int8", runtime="openvino", precision="int8"),
    ])
    rows = {r.name: r for r in stage_rows(record)}
    assert rows["teacher"].trained_m == pytest.approx(22.0)
    assert rows["student.pruned"].trained_m == pytest.approx(3.0) and rows["student.pruned"].trained_share == 0.5
    assert rows["student.openvino_int8"].trained_m is None  # quantization trains nothing
    assert "Trained (M)" in markdown_table(record)
