"""teacher.logits_from: which stages may compute the teacher's logits, refused with the reason."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tinyplm.config.schema import RunConfig, logits_source_problem, teacher_copies

RUNTIME = {"kind": "runtime", "runtime": "fastest", "candidates": ["openvino", "openvino_int8"]}
BEST = {"name": "teacher-best", "init_from": "teacher", "stages": [], "compress": [RUNTIME]}
STUDENT = {"name": "small", "init_from": "minilm-l6", "objective": {"kd_weight": 1.0}}


def config(students: list[dict], logits_from: str | None) -> RunConfig:
    return RunConfig.model_validate({"teacher": {"logits_from": logits_from}, "students": students})


def test_a_compressed_copy_of_the_teacher_made_first_is_accepted() -> None:
    cfg = config([BEST, STUDENT], "teacher-best.runtime")
    assert cfg.teacher.logits_from == "teacher-best.runtime"
    assert list(teacher_copies(cfg.students)) == ["teacher-best.runtime"]


@pytest.mark.parametrize(("students", "named", "why"), [
    ([BEST, STUDENT], "small", "such stages: teacher-best.runtime"),
    ([STUDENT], "teacher-best.runtime", "such stages: none in this recipe"),
    ([STUDENT, BEST], "teacher-best.runtime",
     "student small needs the teacher's logits (to train or to rank what it removes) before teacher-best.runtime"),
    ([{**BEST, "compress": [{"kind": "trim_vocab"}, RUNTIME]}, STUDENT], "teacher-best.runtime",
     "after trim_vocab reads other token ids"),
    ([{**BEST, "compress": [{"kind": "prune_ffn", "keep": 0.5, "recover": {}}, RUNTIME]}, STUDENT],
     "teacher-best.runtime", "recovers by learning the teacher's logits"),
    ([{**BEST, "compress": [{"kind": "prune_heads", "keep": 0.5}, RUNTIME]}, STUDENT],
     "teacher-best.runtime", "its step prune_heads (prune_heads) ranks what to remove by the teacher's logits"),
    ([{**BEST, "compress": [{"kind": "drop_layers", "count": 1}, RUNTIME]}, STUDENT],
     "teacher-best.runtime", "its step drop_layers (drop_layers) ranks"),
    ([{**BEST, "name": "ranked", "compress": [{"kind": "prune_ffn", "keep": 0.5}]}, BEST, STUDENT],
     "teacher-best.runtime", "student ranked needs the teacher's logits (to train or to rank what it removes)"),
])
def test_a_stage_that_cannot_compute_them_is_refused_with_the_reason(students, named, why) -> None:
    assert why in (logits_source_problem(config(students, None).students, named) or "")
    with pytest.raises(ValidationError, match=f"teacher.logits_from '{named}'"):
        config(students, named)


def test_a_teacher_copy_that_recovers_before_the_named_stage_counts_as_training() -> None:
    pruned = {"name": "teacher-pruned", "init_from": "teacher", "stages": [],
              "compress": [{"kind": "prune_ffn", "keep": 0.5, "recover": {}}]}
    problem = logits_source_problem(config([pruned, BEST], None).students, "teacher-best.runtime")
    assert problem and "student teacher-pruned needs the teacher's logits" in problem
