"""``data: task+corpus``: a sentence task's training examples with corpus texts beside them, those
learnt from the fine-tuned teacher's logits alone (their hard loss skipped), a corpus text that is
also a dev or training text left out; refused up front where it cannot work."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from pydantic import ValidationError

from conftest import TINY_TRAIN, make_tiny_glue, make_tiny_model_dir, tiny_recipe, write_recipe
from tinyplm.config import load_recipe
from tinyplm.config.schema import RunConfig
from tinyplm.errors import DataError, RecipeError
from tinyplm.run import run
from tinyplm.run.preflight_corpus import check_corpus_stages
from tinyplm.tasks.base import UNLABELLED_CLASS, Example
from tinyplm.tasks.heads import Head

MIXED = {"data": "task+corpus", "objective": {"kd_weight": 1.0, "hard_weight": 0.5, "temperature": 2.0}}
NEW = ["the plot was a great story and fun", "this film is very dull and the actor is bad",
       "a boring movie but the story is good", "love the film and the plot", "the worst plot of a very bad film"]


def _dev_and_train(glue: Path) -> tuple[str, str]:
    def first(name: str) -> str:
        return (glue / "SST-2" / name).read_text(encoding="utf-8").splitlines()[1].split("\t")[0]
    return first("dev.tsv"), first("train.tsv")


def _recipe(tmp_path: Path) -> tuple[Path, int]:
    model = make_tiny_model_dir(tmp_path / "tiny-bert")
    glue = make_tiny_glue(tmp_path / "glue", n_train=48, n_dev=24)
    dev_text, train_text = _dev_and_train(glue)
    table = tmp_path / "reviews.csv"
    with open(table, "w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["book", "sentence"])
        writer.writeheader()
        writer.writerows({"book": str(i), "sentence": t} for i, t in enumerate([*NEW, dev_text, train_text, "bad"]))
    student = {"name": "tiny-student", "shape": {"layers": 1, "hidden": 16, "heads": 4, "ffn": 20},
               "stages": [{**MIXED, "train": {**TINY_TRAIN, "max_steps": 3}}]}
    recipe = tiny_recipe(tmp_path, model, glue, students=[student])
    recipe["corpus"] = {"paths": [str(table)], "text_field": "sentence"}
    return write_recipe(tmp_path / "r.yaml", recipe), len(NEW)


@pytest.mark.slow
def test_corpus_texts_train_beside_the_task_from_the_teachers_logits_only(tmp_path: Path, monkeypatch) -> None:
    import tinyplm.run.students as students

    path, new = _recipe(tmp_path)
    seen = {}
    real_train = students.train

    def recording(model, data, objective, **kw):
        seen.update(labels=data.labels.clone(), logits=kw["teacher_logits"], rows=len(data))
        return real_train(model, data, objective, **kw)

    monkeypatch.setattr(students, "train", recording)
    cfg = load_recipe(path)
    record = run(cfg)
    info = next(s for s in record.stages if s.name == "tiny-student").info.training[0]
    # the 48 training sentences, then the corpus rows that are neither dev nor training texts
    # (nor under 20 characters): the dev and training sentences in the table are left out
    assert info.data == "task+corpus" and info.examples == 48 + new == seen["rows"]
    labels = seen["labels"]
    assert (labels[:48] != UNLABELLED_CLASS).all() and (labels[48:] == UNLABELLED_CLASS).all()
    assert seen["logits"].shape[0] == 48 + new and torch.isfinite(seen["logits"]).all()


@pytest.mark.parametrize("kind", ["task+corpus", "augmented+corpus"])
def test_a_task_corpus_stage_needs_the_teachers_logits_and_a_corpus_section(kind: str) -> None:
    student = {"shape": {"layers": 1, "hidden": 16, "heads": 4, "ffn": 20}}
    mixed = {**MIXED, "data": kind}
    aug = {"augment": {"mlm": "mlm-dir"}} if kind.startswith("augmented") else {}
    said = re.escape(kind)
    with pytest.raises(ValidationError, match=f"{said}: its corpus texts are learnt from the fine-tuned"):
        RunConfig.model_validate({"students": [{**student, "stages": [{**mixed, "objective": {"hard_weight": 1.0,
                                                                                               "kd_weight": 0}}]}],
                                  "corpus": {"paths": ["texts/"]}, **aug})
    with pytest.raises(ValidationError, match=f"{said}: its corpus texts"):
        RunConfig.model_validate({"students": [{**student, "stages": [{**mixed, "teacher": "base",
                                                                       "objective": {"kd_weight": 0, "hidden": 1}}]}],
                                  "corpus": {"paths": ["texts/"]}, **aug})
    with pytest.raises(ValidationError, match=f"a 'data: {said}' stage needs a 'corpus' section"):
        RunConfig.model_validate({"students": [{**student, "stages": [mixed]}], **aug})
    if aug:  # the copies need the augment section's masked LM, as a data: augmented stage does
        with pytest.raises(ValidationError, match=f"a 'data: {said}' stage needs an 'augment' section with 'mlm'"):
            RunConfig.model_validate({"students": [{**student, "stages": [mixed]}], "corpus": {"paths": ["texts/"]}})
    RunConfig.model_validate({"students": [{**student, "stages": [mixed]}], "corpus": {"paths": ["texts/"]}, **aug})


def _cfg(tmp_path: Path, **corpus) -> RunConfig:
    student = {"shape": {"layers": 1, "hidden": 16, "heads": 4, "ffn": 20}, "stages": [MIXED]}
    return RunConfig.model_validate({"students": [student], "corpus": {"paths": [str(tmp_path / "r.csv")], **corpus}})


def _data(head: Head, pair: str | None = None):
    return SimpleNamespace(task="mrpc" if pair else "some-task", head=head,
                           train=SimpleNamespace(examples=[Example("a sentence", pair, 1)]))


@pytest.mark.parametrize(("head", "pair", "said"), [
    (Head.SEQUENCE, "a second sentence", "is a sentence-pair task, .*name the column of each row's second text "
                                         "in corpus.pair_field"),
    (Head.TOKEN, None, "is a token-head task"),
    (Head.EMBEDDING, None, "an embedding task's corpus texts are task.train_texts: corpus"),
])
def test_task_corpus_is_refused_before_any_work_where_a_corpus_text_is_no_example(
        tmp_path: Path, head: Head, pair: str | None, said: str) -> None:
    (tmp_path / "r.csv").write_text("sentence\nA review sentence long enough to keep.\n", encoding="utf-8")
    with pytest.raises(RecipeError, match=said):
        check_corpus_stages(_cfg(tmp_path, text_field="sentence"), _data(head, pair))
    check_corpus_stages(_cfg(tmp_path, text_field="sentence"), _data(Head.SEQUENCE))


def test_the_refusal_names_the_stages_kind_of_data(tmp_path: Path) -> None:
    (tmp_path / "r.csv").write_text("sentence\nA review sentence long enough to keep.\n", encoding="utf-8")
    student = {"shape": {"layers": 1, "hidden": 16, "heads": 4, "ffn": 20},
               "stages": [{**MIXED, "data": "augmented+corpus"}]}
    cfg = RunConfig.model_validate({"students": [student], "augment": {"mlm": "mlm-dir"},
                                    "corpus": {"paths": [str(tmp_path / "r.csv")], "text_field": "sentence"}})
    with pytest.raises(RecipeError, match=r"data: augmented\+corpus: task 'mrpc' is a sentence-pair task"):
        check_corpus_stages(cfg, _data(Head.SEQUENCE, "a second sentence"))
    check_corpus_stages(cfg, _data(Head.SEQUENCE))


def test_an_unreadable_corpus_is_found_by_preflight_naming_corpus_paths(tmp_path: Path) -> None:
    (tmp_path / "r.csv").write_text("sentence\nA review sentence long enough to keep.\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"corpus\.paths: .*r\.csv: a table; name the field .*'sentence'"):
        check_corpus_stages(_cfg(tmp_path), _data(Head.SEQUENCE))
    with pytest.raises(DataError, match=r"corpus\.paths: .*r\.csv:2: no field 'text'"):
        check_corpus_stages(_cfg(tmp_path, text_field="text"), _data(Head.SEQUENCE))


def test_a_pair_task_reads_pairs_of_a_table_and_a_sentence_task_refuses_them(tmp_path: Path) -> None:
    (tmp_path / "r.csv").write_text("question,sentence\nWho wrote it?,A poet wrote the book.\n", encoding="utf-8")
    check_corpus_stages(_cfg(tmp_path, text_field="question", pair_field="sentence"),
                        _data(Head.SEQUENCE, "a second sentence"))
    with pytest.raises(RecipeError, match="is a single-sentence task, and corpus.pair_field makes the corpus pairs"):
        check_corpus_stages(_cfg(tmp_path, text_field="question", pair_field="sentence"), _data(Head.SEQUENCE))
    with pytest.raises(DataError, match=r"corpus\.paths: .*r\.csv:2: no field 'hypothesis'"):
        check_corpus_stages(_cfg(tmp_path, text_field="question", pair_field="hypothesis"),
                            _data(Head.SEQUENCE, "a second sentence"))
    with pytest.raises(ValidationError, match="corpus.pair_field: 'sentence' is a pair's second text; name its first"):
        _cfg(tmp_path, pair_field="sentence")
    student = {"shape": {"layers": 1, "hidden": 16, "heads": 4, "ffn": 20},
               "stages": [{"data": "corpus", "objective": {"kd_weight": 0, "hard_weight": 0, "hidden": 1}}]}
    general = RunConfig.model_validate({"students": [student], "corpus": {
        "paths": [str(tmp_path / "r.csv")], "text_field": "question", "pair_field": "sentence"}})
    with pytest.raises(RecipeError, match="a 'data: corpus' stage reads single texts; corpus.pair_field"):
        check_corpus_stages(general, _data(Head.SEQUENCE, "a second sentence"))


def test_a_pair_tasks_stage_data_is_its_pairs_then_the_corpus_pairs_it_has_not_seen(tmp_path: Path) -> None:
    from tinyplm.config.data_sources import CorpusSpec
    from tinyplm.run.inputs import StageData
    from tinyplm.tasks.base import Split

    train = [Example("Who wrote it?", "A poet wrote the book.", 1), Example("When?", "In May.", 0)]
    dev = [Example("Where is it?", "It is in Paris.", 1)]
    rows = [("Where is it?", "It is in Paris."), ("Who wrote it?", "A poet wrote the book."),
            ("Who wrote it?", "Nobody knows who did."), ("How old is she?", "She turned forty  in June.")]
    table = tmp_path / "qnli.tsv"
    table.write_text("question\tsentence\n" + "".join(f"{q}\t{a}\n" for q, a in rows), encoding="utf-8")
    data = SimpleNamespace(train=Split("train", train, None), evals={"dev": Split("dev", dev, None)},
                           is_regression=False)
    task = SimpleNamespace(max_train_examples=None, max_length=32)
    corpus = CorpusSpec(paths=[str(table)], text_field="question", pair_field="sentence")
    stage = StageData(task, data, None, None, None, corpus, None, tmp_path)
    got = stage.split("task+corpus").examples
    # the dev pair and the training pair are left out; a known question with a new sentence is new
    assert [(e.text, e.text_pair) for e in got] == [*((e.text, e.text_pair) for e in train),
                                                   ("Who wrote it?", "Nobody knows who did."),
                                                   ("How old is she?", "She turned forty in June.")]
    assert [e.label for e in got[2:]] == [UNLABELLED_CLASS] * 2 and [e.label for e in got[:2]] == [1, 0]
