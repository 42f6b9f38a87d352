"""Examples longer than task.max_length are counted per split, logged, and shown in the report:
a task of long texts learns from their first pieces only, and the user is told how many."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import WORDS, make_tiny_glue, make_tiny_model_dir, tiny_recipe
from tinyplm.models import load_tokenizer
from tinyplm.run.cut_texts import cut_texts
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import encode_split


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return load_tokenizer(make_tiny_model_dir(tmp_path_factory.mktemp("m")), 99)


def _split(texts: list[str], pairs: list[str | None] | None = None) -> Split:
    pairs = pairs or [None] * len(texts)
    return Split("train", [Example(t, p, 0) for t, p in zip(texts, pairs, strict=True)], Path("train.tsv"))


@settings(max_examples=30, deadline=None)
@given(words=st.lists(st.integers(0, 20), min_size=1, max_size=12), width=st.integers(8, 16))
def test_counts_exactly_the_examples_longer_than_the_window(tokenizer, words: list[int], width: int) -> None:
    """Texts of n one-piece words are n + 2 pieces: those over ``width`` are cut, one exactly as
    long is not."""
    texts = [" ".join(WORDS[:n]) for n in words]
    split = _split(texts)
    cut = cut_texts({"train": (split, encode_split(split, tokenizer, width))}, tokenizer, width)
    over = [n + 2 for n in words if n + 2 > width]
    if not over:
        assert cut == []
        return
    (row,) = cut
    assert (row.split, row.cut, row.examples, row.width, row.longest) == ("train", len(over), len(texts), width,
                                                                          max(over))
    assert f"{len(over)} of {len(texts)} train examples" in row.sentence()


def test_pairs_count_both_texts(tokenizer) -> None:
    split = _split(["good film"] * 2, ["the plot is dull", "fun"])  # 2 + 4 + 3 = 9 and 2 + 1 + 3 = 6 pieces
    (row,) = cut_texts({"dev": (split, encode_split(split, tokenizer, 8))}, tokenizer, 8)
    assert (row.cut, row.longest) == (1, 9)


def test_a_run_logs_and_reports_what_max_length_cuts(tmp_path: Path, caplog) -> None:
    from tinyplm.config import validate_recipe
    from tinyplm.run import run

    glue = make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8)
    recipe = tiny_recipe(tmp_path, make_tiny_model_dir(tmp_path / "m"), glue)
    recipe["task"]["max_length"] = 8
    with caplog.at_level(logging.WARNING, logger="tinyplm.run.pipeline"):
        record = run(validate_recipe(recipe, source="test"))
    assert record.info.cut and record.info.cut[0].split == "train"
    assert any("task.max_length: " in r.getMessage() and "are longer than 8 pieces" in r.getMessage()
               for r in caplog.records)
    root = Path(recipe["output_dir"])
    saved = json.loads((root / "results.json").read_text())["info"]["cut"]
    assert [c["split"] for c in saved] == [c.split for c in record.info.cut]
    assert "⚠ `task.max_length`: " in (root / "summary.md").read_text()
    assert "the transformer stages read only their first 8 pieces" in (root / "report.html").read_text()


def test_evaluate_says_what_its_max_length_cuts(tmp_path: Path) -> None:
    from helpers_cli import cli

    glue = make_tiny_glue(tmp_path / "glue", n_train=8, n_dev=8)
    model = make_tiny_model_dir(tmp_path / "m")
    result = cli(["evaluate", str(model), "--task", "sst2", "--data-dir", str(glue), "--max-length", "8", "--json"],
                 cwd=tmp_path)
    assert result.returncode == 0, result.output
    assert "note: --max-length 8: " in result.stderr and "dev examples" in result.stderr
    assert json.loads(result.stdout)["task"] == "sst2"  # the note stays off the JSON
    wide = cli(["evaluate", str(model), "--task", "sst2", "--data-dir", str(glue), "--max-length", "64"], cwd=tmp_path)
    assert wide.returncode == 0 and "note:" not in wide.stderr


def test_evaluate_names_its_own_flags_for_window_settings_on_another_task(tmp_path: Path) -> None:
    from helpers_cli import assert_bad_input, cli

    glue = make_tiny_glue(tmp_path / "glue", n_train=8, n_dev=8)
    model = make_tiny_model_dir(tmp_path / "m")
    assert_bad_input(cli(["evaluate", str(model), "--task", "sst2", "--data-dir", str(glue),
                          "--max-query-length", "32"], cwd=tmp_path),
                     "--max-query-length: for SQuAD tasks (squad, squad_v2)", "task sst2 reads none")


def test_sentences_of_words_are_counted_as_a_tagger_reads_them(tokenizer) -> None:
    from tinyplm.tasks.conll import Sentence
    from tinyplm.tasks.heads import Head

    sentences = [Sentence(tuple(WORDS[:n]), ("O",) * n, i + 1) for i, n in enumerate((6, 9, 3))]  # n + 2 pieces
    split = Split("train", sentences, Path("train.txt"), Head.TOKEN, {"tags": ("O",)})
    (row,) = cut_texts({"train": (split, encode_split(split, tokenizer, 8))}, tokenizer, 8)
    assert (row.cut, row.longest) == (1, 11)  # 6 words fill the window exactly: not cut
