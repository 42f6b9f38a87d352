"""Readers of the JSONL log (``observe_log``) see each record of their file, only within their block."""

from __future__ import annotations

from pathlib import Path

from tinyplm.train.progress import JsonlLog, observe_log


def test_an_observer_sees_the_records_of_its_file_only_while_observing(tmp_path: Path) -> None:
    seen: list[dict] = []
    mine, other = JsonlLog(tmp_path / "a" / "train.jsonl", "teacher"), JsonlLog(tmp_path / "b.jsonl", "x")
    with observe_log(tmp_path / "a" / ".." / "a" / "train.jsonl", seen.append):
        mine.write(event="train", step=1, loss=0.5)
        other.write(event="train", step=1, loss=0.7)
        JsonlLog(tmp_path / "a" / "train.jsonl", "teacher", enabled=False).write(event="train", step=2)
    mine.write(event="train", step=3, loss=0.4)
    assert [(r["stage"], r["step"], r["loss"]) for r in seen] == [("teacher", 1, 0.5)]
    assert len((tmp_path / "a" / "train.jsonl").read_text().splitlines()) == 2  # the file is as before
