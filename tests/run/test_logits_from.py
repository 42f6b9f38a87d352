"""teacher.logits_from: students learn the teacher's logits as a saved stage (the teacher on
another runtime) computes them, cached under that stage's fingerprint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from conftest import TINY_TRAIN, make_tiny_glue, make_tiny_model_dir, tiny_recipe, write_recipe
from tinyplm.config import load_recipe
from tinyplm.errors import RecipeError
from tinyplm.models import fingerprint, load_classifier
from tinyplm.models.infer import predict_logits
from tinyplm.run import run
from tinyplm.run.inputs import LogitsSource, Teachers
from tinyplm.tasks import load_task
from tinyplm.tasks.encoding import encode_split

pytestmark = pytest.mark.slow

LABELS = (("negative", "positive"), False, "sequence")


def test_students_learn_the_logits_of_the_named_stage(tmp_path: Path) -> None:
    glue = make_tiny_glue(tmp_path / "glue", n_train=48, n_dev=24)
    students = [
        {"name": "teacher-best", "init_from": "teacher", "stages": [], "compress": [{"kind": "openvino"}]},
        {"name": "small", "teacher_layers": [1], "objective": {"kd_weight": 1.0, "hard_weight": 0.0},
         "train": {**TINY_TRAIN, "max_steps": 3}},
    ]
    recipe = tiny_recipe(tmp_path, make_tiny_model_dir(tmp_path / "tiny-bert"), glue, students=students,
                         teacher={"model": str(tmp_path / "tiny-bert"), "finetune": {**TINY_TRAIN, "max_steps": 3},
                                  "logits_from": "teacher-best.openvino"})
    cfg = load_recipe(write_recipe(tmp_path / "r.yaml", recipe))
    run(cfg)
    root = Path(cfg.output_dir)
    results = json.loads((root / "results.json").read_text())
    assert results["info"]["precision"]["teacher_logits"] == "teacher-best.openvino"

    source = root / "students" / "teacher-best.openvino"
    entries = sorted((tmp_path / "cache" / "logits").glob("*.safetensors"))
    assert len(entries) == 1  # one set of logits, by the stage, for the one training set
    with safe_open(str(entries[0]), "pt") as f:
        assert f.metadata()["teacher"] == fingerprint(source)
        cached = f.get_tensor("logits")
    assert fingerprint(source) != fingerprint(root / "teacher")  # the IR's files are in its fingerprint
    ov, tok = load_classifier(source, *LABELS)
    data = load_task(cfg.task)
    expected = predict_logits(ov, encode_split(data.train, tok, cfg.task.max_length), batch_size=128)
    torch.testing.assert_close(cached, expected)


def test_a_stage_not_yet_saved_is_refused_when_the_logits_are_needed(tmp_path: Path) -> None:
    teacher = torch.nn.Linear(2, 2)
    missing = LogitsSource("teacher-best.runtime", tmp_path / "students" / "teacher-best.runtime", LABELS)
    teachers = Teachers(teacher, tmp_path / "teacher", tmp_path / "teacher", "fp32", tmp_path / "cache", missing)
    with pytest.raises(RecipeError, match="teacher-best.runtime, which is not saved"):
        teachers.logits(None)
