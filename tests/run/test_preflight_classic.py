"""Classic students' vocabulary settings are counted before the teacher trains, on the texts the
student will read: the training texts, or its corpus read as the run reads it (a table by its
``corpus.text_field``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import make_tiny_glue, make_tiny_model_dir, tiny_recipe
from tinyplm.config import validate_recipe
from tinyplm.errors import RecipeError
from tinyplm.run.preflight import load_task
from tinyplm.run.preflight_classic import check_vocabularies


def _cfg(tmp_path: Path, corpus: dict, min_count: int):
    glue = make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8)
    student = {"name": "w2v", "family": {"arch": "bilstm", "hidden": 8, "vocab_size": 100,
                                         "embeddings": {"kind": "word2vec", "dim": 8, "min_count": min_count}}}
    recipe = tiny_recipe(tmp_path, make_tiny_model_dir(tmp_path / "m"), glue, students=[student], corpus=corpus)
    cfg = validate_recipe(recipe, source="test")
    return cfg, load_task(cfg.task, cfg.corpus)


def test_a_table_corpus_is_read_by_its_text_field(tmp_path: Path) -> None:
    rows = "\n".join(f'{i},"the plot of film {i} was good and the actor was fun"' for i in range(30))
    (tmp_path / "reviews.csv").write_text(f"id,review\n{rows}\n", encoding="utf-8")
    cfg, data = _cfg(tmp_path, {"paths": [str(tmp_path / "reviews.csv")], "text_field": "review"}, 3)
    check_vocabularies(cfg, data)  # read as the run reads it: no refusal
    cfg, data = _cfg(tmp_path / "high", {"paths": [str(tmp_path / "reviews.csv")], "text_field": "review"}, 61)
    with pytest.raises(RecipeError, match=r"embeddings.min_count 61 keeps no word of the 30 corpus texts .*seen 60"):
        check_vocabularies(cfg, data)


def test_students_of_one_corpus_read_it_once_and_each_is_still_checked(tmp_path: Path, monkeypatch) -> None:
    """A recipe of a dozen BiLSTMs over one corpus read and counted it a dozen times (most of
    ``validate``'s time on the spoiler recipes); each student's own min_count is still judged."""
    import tinyplm.run.preflight_classic as preflight_classic

    (tmp_path / "c.txt").write_text("\n\n".join(["the plot of the film was good and fun"] * 30), encoding="utf-8")
    glue = make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8)
    students = [{"name": f"w2v{i}", "family": {"arch": "bilstm", "hidden": 8, "vocab_size": 100,
                                               "embeddings": {"kind": "word2vec", "dim": 8, "min_count": count}}}
                for i, count in enumerate((1, 5, 10, 61))]
    recipe = tiny_recipe(tmp_path, make_tiny_model_dir(tmp_path / "m"), glue, students=students,
                         corpus={"paths": [str(tmp_path / "c.txt")]})
    cfg = validate_recipe(recipe, source="test")
    reads = []
    real = preflight_classic.read_corpus
    monkeypatch.setattr(preflight_classic, "read_corpus", lambda *a, **k: reads.append(a) or real(*a, **k))
    with pytest.raises(RecipeError, match=r"student w2v3: family.embeddings.min_count 61 .*seen 60"):
        check_vocabularies(cfg, load_task(cfg.task, cfg.corpus))
    assert len(reads) == 1
