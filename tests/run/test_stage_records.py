"""What a resumed run takes as a finished stage: a whole model dir and the record written after it
(``checkpoints/NAME/stage.json``). A record missing (a run copied without its checkpoints/ folder)
or damaged was either made again without a word or a raw JSONDecodeError mid-resume; now the stage
is made again and the log says why."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tinyplm.models.io import COMPLETE_MARK
from tinyplm.run.inputs import RunPaths


def test_a_stage_is_finished_only_with_its_record_and_a_missing_or_damaged_one_is_said(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    paths = RunPaths(tmp_path)
    model_dir = tmp_path / "teacher"
    model_dir.mkdir()
    record = tmp_path / "checkpoints" / "teacher" / "stage.json"
    record.parent.mkdir(parents=True)
    record.write_text('{"name": "teacher"}')
    assert paths.finished(model_dir) is None  # not whole: no mark, no word (an interrupted save)
    (model_dir / COMPLETE_MARK).write_text("ok\n")
    assert paths.finished(model_dir) == {"name": "teacher"}
    assert caplog.records == []
    with caplog.at_level(logging.WARNING):
        record.write_text('{"name": "teach')
        assert paths.finished(model_dir) is None
        record.unlink()
        assert paths.finished(model_dir) is None
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and f"{record}: damaged" in said[0]
    assert f"{model_dir} is whole, but its record {record} is missing" in said[1]
