"""A model that reads the teacher's encoding must share its token ids: checked on the tokenizers
themselves (not only the vocabulary size), before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import BertTokenizerFast

from conftest import make_tiny_glue, make_tiny_model_dir, tiny_recipe, tiny_vocab, write_recipe
from helpers_cli import cli
from tinyplm.models.token_ids import token_id_mismatch


def _tokenizer(vocab: list[str]) -> BertTokenizerFast:
    return BertTokenizerFast(vocab={t: i for i, t in enumerate(vocab)}, do_lower_case=True)


def _retokenized(path: Path, vocab: list[str]) -> Path:
    """A tiny model dir whose tokenizer is ``vocab`` (same size as the teacher's, other ids)."""
    make_tiny_model_dir(path)
    for name in ("tokenizer.json", "vocab.txt"):
        (path / name).unlink(missing_ok=True)
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    _tokenizer(vocab).save_pretrained(path)
    return path


def _shifted() -> list[str]:
    """The tiny vocabulary with its special tokens moved to the end, every other id shifted (as
    MPNet's ids are BERT's shifted by 4)."""
    vocab = tiny_vocab()
    special = [t for t in vocab if t.startswith("[")]
    return [t for t in vocab if not t.startswith("[")] + special


def _swapped() -> list[str]:
    """Two ordinary words of the tiny vocabulary trade ids; everything else equal."""
    vocab = tiny_vocab()
    words = [i for i, t in enumerate(vocab) if t.isalpha()]
    a, b = words[0], words[1]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    return vocab


def test_equal_tokenizers_match_and_others_are_named() -> None:
    same = _tokenizer(tiny_vocab())
    assert token_id_mismatch(same, _tokenizer(tiny_vocab())) is None
    assert "cls_token" in token_id_mismatch(same, _tokenizer(_shifted()))
    swapped = token_id_mismatch(same, _tokenizer(_swapped()))
    assert swapped is not None and "here and" in swapped
    assert "word pieces" in token_id_mismatch(same, _tokenizer(tiny_vocab()[:-1]))


@pytest.mark.parametrize("vocab", [_shifted, _swapped], ids=["shifted", "swapped"])
def test_validate_refuses_a_student_initialised_from_another_tokenizer(tmp_path: Path, vocab) -> None:
    teacher = make_tiny_model_dir(tmp_path / "teacher")
    other = _retokenized(tmp_path / "other", vocab())
    recipe = tiny_recipe(tmp_path, teacher, make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8),
                         students=[{"name": "s", "init_from": str(other)}])
    path = write_recipe(tmp_path / "r.yaml", recipe)
    result = cli(["validate", str(path)], cwd=tmp_path)
    assert result.returncode == 2
    line = result.stderr.strip()
    assert "\n" not in line and str(other) in line and str(teacher) in line
    assert "student s: init_from" in line and "tokenizes otherwise than the teacher" in line
    same = _retokenized(tmp_path / "same", tiny_vocab())  # the teacher's tokenizer in another dir: fine
    recipe["students"][0]["init_from"] = str(same)
    assert cli(["validate", str(write_recipe(path, recipe))], cwd=tmp_path).returncode == 0
    assert not (tmp_path / "runs").exists()


def test_a_stage_teacher_of_another_tokenizer_is_refused(tmp_path: Path) -> None:
    teacher = make_tiny_model_dir(tmp_path / "teacher")
    other = _retokenized(tmp_path / "other", _shifted())
    stage = {"teacher": str(other), "objective": {"kd_weight": 0.0, "hidden": 1.0}, "train": {"epochs": 1}}
    recipe = tiny_recipe(tmp_path, teacher, make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8),
                         students=[{"name": "s", "teacher_layers": [1], "stages": [stage]}])
    result = cli(["validate", str(write_recipe(tmp_path / "r.yaml", recipe))], cwd=tmp_path)
    assert result.returncode == 2
    assert "stage 0: teacher" in result.stderr and "a stage teacher must share the tokenizer" in result.stderr
