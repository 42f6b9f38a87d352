"""benchmarks/tvtropes_gaps.py on a tiny TV Tropes folder whose gaps give the label away: the gap
regression finds them, word n-grams cannot, a teacher's tokens do not change, and the last line
printed is the path of the JSON written."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import tvtropes_gaps as gaps
from conftest import make_tiny_model_dir
from tinyplm.tasks.spoilers import TVTROPES_DIR

WORDS = ["the hero", "a villain", "the ship", "her father", "the town", "a robot", "the king", "his sister"]


def _folder(root: Path) -> None:
    """Spoilers are the sentences with markup gaps; their words are drawn like the others'."""
    (root / TVTROPES_DIR).mkdir(parents=True)
    for split, n in (("train", 80), ("dev", 40)):
        rows = []
        for i in range(n):
            label = i % 2
            a, b = WORDS[i // 2 % len(WORDS)], WORDS[(i // 2 + 3) % len(WORDS)]  # each pair once per label
            text = f"In the end   {a} meets {b} ." if label else f"In the end {a} meets {b}."
            rows.append(f'{i},"{text}",{label}')
        (root / TVTROPES_DIR / f"{split}.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")


def test_the_gaps_alone_find_the_label_and_word_ngrams_cannot(tmp_path: Path, monkeypatch, capsys) -> None:
    _folder(tmp_path / "data")
    teacher = make_tiny_model_dir(tmp_path / "teacher")
    out = tmp_path / "gaps.json"
    monkeypatch.setattr(sys, "argv", ["tvtropes_gaps.py", "--data-dir", str(tmp_path / "data"),
                                      "--teacher", str(teacher), "--out", str(out)])
    gaps.main()
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed[-1] == str(out)
    got = json.loads(out.read_text())
    assert got["train"] == 80 and got["dev"] == 40
    assert got["gap_rates"]["dev"] == {"share_with_three_spaces": 0.5, "spoiler_rate_with": 1.0,
                                       "spoiler_rate_without": 0.0}
    assert got["gaps_only"]["roc_auc"] == 1.0 and got["gaps_only"]["accuracy"] == 1.0
    assert got["char_tfidf"]["raw"]["roc_auc"] == 1.0 and got["char_tfidf"]["closed"]["roc_auc"] == 0.5
    assert got["word_tfidf"]["raw"] == got["word_tfidf"]["closed"] and got["word_tfidf"]["raw"]["roc_auc"] == 0.5
    assert got["tokens_changed"] == {"word": 0} and got["teacher_tokens_changed"] == 0
    assert got["teacher_plus_gaps_leak"]["roc_auc"] >= got["teacher"]["roc_auc"]


def test_a_missing_folder_is_named(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "o.json"
    monkeypatch.setattr(sys, "argv", ["tvtropes_gaps.py", "--data-dir", str(tmp_path), "--out", str(out)])
    with pytest.raises(SystemExit, match=r"spoilers/tvtropes/train\.csv: file not found"):
        gaps.main()
    assert not out.exists()


def test_a_teacher_trained_with_page_context_is_scored_with_it(tmp_path: Path, monkeypatch) -> None:
    """The teacher row reads dev as `tinyplm evaluate` does for that teacher: its stamped length and
    the sentences around each one, not the sentence alone."""
    from helpers_cli import cli

    _folder(tmp_path / "data")
    teacher = make_tiny_model_dir(tmp_path / "teacher")
    cfg = json.loads((teacher / "config.json").read_text())
    stamp = {"name": "tvtropes_spoilers", "max_length": 48, "context_sentences": 1, "context_after": 1}
    (teacher / "config.json").write_text(json.dumps({**cfg, "tinyplm_task": stamp}))
    out = tmp_path / "gaps.json"
    monkeypatch.setattr(sys, "argv", ["tvtropes_gaps.py", "--data-dir", str(tmp_path / "data"),
                                      "--teacher", str(teacher), "--out", str(out)])
    gaps.main()
    got = json.loads(out.read_text())["teacher"]
    args = ["evaluate", teacher, "--task", "tvtropes_spoilers", "--data-dir", tmp_path / "data", "--json"]
    scored = json.loads(cli(args, cwd=tmp_path).stdout)
    alone = json.loads(cli([*args, "--context-sentences", "0", "--context-after", "0"], cwd=tmp_path).stdout)
    assert (scored["context_sentences"], scored["context_after"]) == (1, 1)
    assert got["roc_auc"] == pytest.approx(scored["metrics"]["roc_auc"])
    assert got["accuracy"] == pytest.approx(scored["metrics"]["accuracy"])
    assert alone["metrics"]["roc_auc"] != pytest.approx(got["roc_auc"])
