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


def test_a_smaller_stage_about_as_fast_as_the_fastest_is_chosen_over_it() -> None:
    """A runtime form 2.5x smaller than its parent and 1% slower (a tie within measurement noise)
    is chosen over the parent under the default tie; with the tie at 0 the measured fastest wins,
    and one 10% slower is not tied."""
    record = make_record()
    pruned, runtime = record.stage("student.pruned"), record.stage("student.openvino_int8")
    pruned.throughput_sent_per_s, runtime.throughput_sent_per_s = 1212.0, 1200.0
    chosen, why = select_final(record, "fastest", 0.98, speed_tie=FinalSpec().speed_tie)
    assert chosen is runtime
    assert "student.openvino_int8 is 2.5x smaller than student.pruned and within 5% of its throughput" in why
    assert select_final(record, "fastest", 0.98)[0] is pruned
    runtime.throughput_sent_per_s = 1090.0
    chosen, why = select_final(record, "fastest", 0.98, speed_tie=0.05)
    assert chosen is pruned and "smaller" not in why


def test_the_speed_tie_is_left_out_of_a_resolved_recipe_at_its_default() -> None:
    assert "speed_tie" not in FinalSpec().model_dump()
    assert FinalSpec(speed_tie=0.1).model_dump()["speed_tie"] == 0.1
