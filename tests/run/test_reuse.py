"""A finished run is reused only for the same recipe over the same teacher weights."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import make_tiny_glue, make_tiny_model_dir, tiny_recipe
from tinyplm.config import validate_recipe
from tinyplm.errors import RunDirError
from tinyplm.run import run_or_reuse


def test_a_teacher_with_new_weights_is_not_reused_from_a_finished_run(tmp_path: Path) -> None:
    teacher = make_tiny_model_dir(tmp_path / "teacher")
    raw = tiny_recipe(tmp_path, teacher, make_tiny_glue(tmp_path / "glue", n_train=32, n_dev=16))
    del raw["teacher"]["finetune"]  # the teacher as it is, named by path (as a benchmark does)
    cfg = validate_recipe(raw, source="test")

    first = run_or_reuse(cfg)
    results = Path(cfg.output_dir) / "results.json"
    written = results.read_bytes()
    assert len(first.info.teacher_fingerprint) == 64
    assert run_or_reuse(cfg).info.started_unix == first.info.started_unix  # the same run, reused

    make_tiny_model_dir(teacher, seed=1)  # fine-tuned again into the same folder
    with pytest.raises(RunDirError, match="other weights"):
        run_or_reuse(cfg)
    assert results.read_bytes() == written  # the finished run is left as it was
