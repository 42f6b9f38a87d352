"""run.final: the recipe's final rule picks the model that becomes ``model/`` (the report only shows it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.report.test_runtime_columns import make_record

from tinyplm.config.schema import FinalSpec
from tinyplm.run.final import place_final, select_final


@pytest.mark.parametrize("rule, expected", [("fastest", "student.openvino_int8"), ("smallest", "student.openvino_int8"),
                                            ("most_accurate", "teacher-best.openvino_int8")])
def test_final_rule(rule: str, expected: str) -> None:
    chosen, why = select_final(make_record(), rule, 0.98)  # 0.98 * 0.90 = 0.882: too-lossy (0.80) is out
    assert chosen.name == expected and "0.98" not in why and "98%" in why


def test_final_rule_falls_back_to_the_most_accurate_when_nothing_keeps_enough() -> None:
    chosen, why = select_final(make_record(), "fastest", 1.0)
    assert chosen.name == "teacher-best.openvino_int8" and "no stage kept 100%" in why


def test_place_final_copies_the_chosen_stage_and_records_why(tmp_path: Path) -> None:
    record = make_record()
    for stage in record.stages:
        stage.model_dir = f"students/{stage.name}"
        (tmp_path / stage.model_dir).mkdir(parents=True)
        (tmp_path / stage.model_dir / "config.json").write_text(stage.name)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "stale.bin").write_text("from an earlier try")
    chosen = place_final(record, tmp_path, FinalSpec(rule="smallest"))
    assert chosen.name == "student.openvino_int8" == record.info.final_model
    assert "the smallest" in record.info.final_rule
    assert sorted(p.name for p in (tmp_path / "model").iterdir()) == ["config.json"]
    assert (tmp_path / "model" / "config.json").read_text() == "student.openvino_int8"


def test_a_run_that_holds_examples_out_chooses_on_them_not_on_dev() -> None:
    """On dev the pruned int8 student keeps 98.1% of the teacher (the fastest that keeps 98%); on
    the held-out training examples it keeps 97.0%, and the choice follows those."""
    record = make_record()
    held = {"teacher": 0.90, "teacher-best.openvino_int8": 0.899, "student": 0.889, "student.pruned": 0.888,
            "student.openvino_int8": 0.873, "student.too-lossy": 0.80}
    for s in record.stages:
        s.metrics["accuracy_holdout"] = held[s.name]
    assert select_final(record, "fastest", 0.98)[0].name == "student.openvino_int8"  # on dev
    record.info.selection_metric, record.info.holdout = "accuracy_holdout", 500
    chosen, why = select_final(record, "fastest", 0.98)
    assert chosen.name == "student.pruned" and "on 500 held-out training examples" in why
    chosen, why = select_final(record, "fastest", 1.0)  # none keeps 100%: the most accurate on held-out
    assert chosen.name == "teacher-best.openvino_int8" and "no stage kept 100%" in why and "held-out" in why


def test_a_guard_metric_must_keep_the_same_share_of_the_teacher_as_the_chosen_on_one() -> None:
    """The int8 student keeps 98% of the teacher's held-out accuracy but loses retrieval on held-out
    passages (0.70 of 0.80): with that metric a guard, the pruned student is the fastest left; a
    guard the teacher was not measured on is ignored."""
    record = make_record()
    record.info.selection_metric, record.info.holdout = "accuracy", 500
    passages = {"teacher": 0.80, "teacher-best.openvino_int8": 0.80, "student": 0.795, "student.pruned": 0.79,
                "student.openvino_int8": 0.70, "student.too-lossy": 0.80}
    for s in record.stages:
        s.metrics["ndcg_at_10_holdout_passages"] = passages[s.name]
    assert select_final(record, "fastest", 0.98)[0].name == "student.openvino_int8"
    record.info.guard_metrics = ["ndcg_at_10_holdout_passages"]
    chosen, why = select_final(record, "fastest", 0.98)
    assert chosen.name == "student.pruned" and "ndcg_at_10_holdout_passages" in why
    chosen, why = select_final(record, "fastest", 0.98, guard_retention=0.85)  # 0.70 / 0.80 = 0.875
    assert chosen.name == "student.openvino_int8" and "85% of its ndcg_at_10_holdout_passages" in why
    record.info.guard_metrics = ["not_measured"]
    chosen, why = select_final(record, "fastest", 0.98)
    assert chosen.name == "student.openvino_int8" and "not_measured" not in why
