"""One reader per format: what training reads (the task loaders of ``tinyplm.tasks``) and what
``tinyplm predict`` reads from the same file (``source_for`` + ``read_inputs``, as the command
calls them) are the same texts, pairs and clean-up, in the same rows; training also has the labels.

Every format is written small in ``tmp_path``: GLUE TSV (with a header, and CoLA's without), CSV
with a header (custom, Goodreads sentences) and without (TV Tropes), JSON lines (custom), SQuAD
JSON, CoNLL, Goodreads reviews and plain text. The spoiler files carry markup gaps, so the clean-up
is checked on both sides, and the context windows where a task has them. A bad row is refused by
both sides with one message: the difference is the policy (raise, or skip and record).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tinyplm import tasks
from tinyplm.errors import DataError
from tinyplm.inference.pairs import task_pairs
from tinyplm.inference.records import QAInput, TextInput, TokensInput
from tinyplm.predict.inputs import read_inputs
from tinyplm.predict.predict import SKIP_HINT, source_for
from tinyplm.predict.sources import open_binary
from tinyplm.tasks.heads import Head
from tinyplm.tasks.readers.rows import Policy
from tinyplm.tasks.spoilers import GOODREADS_CSV, GOODREADS_JSONL, TVTROPES_DIR, in_dev, spoiler_task
from tinyplm.tasks.squad import squad_task

RAISE = Policy("raise", labels=False, hint=SKIP_HINT)


def predicted(path: Path, head: Head = Head.SEQUENCE, task: str | None = None, before: int = 0, after: int = 0,
              policy: Policy = RAISE, **columns) -> list:
    """The rows ``tinyplm predict`` reads from ``path`` for a model of ``head`` trained on ``task``."""
    info = SimpleNamespace(head=head, task=task, context_sentences=before, context_after=after,
                           pairs=task_pairs(task, context=bool(before or after)) if Head(head).row.task_texts else None)
    source = source_for(info, str(path), columns.get("input_format"), columns.get("text_column"),
                        columns.get("pair_column"), columns.get("header"))
    with open_binary(source.path) as stream:
        return list(read_inputs(source, stream, policy))


def texts(examples) -> list[TextInput]:
    return [TextInput(e.text, e.text_pair) for e in examples]


def both_sides(task, split_of=lambda e: e.line) -> list:
    """The examples of a task's train and dev splits of one file, in file order."""
    return sorted([*task.read("train").examples, *task.read("dev").examples], key=split_of)


def test_glue_tsv_with_and_without_a_header(tmp_path: Path) -> None:
    (tmp_path / "MRPC").mkdir()
    mrpc = tmp_path / "MRPC" / "dev.tsv"
    mrpc.write_text('Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tHe said "go\tShe went .\n'
                    "0\t3\t4\tA  b .\tC d\n", encoding="utf-8")
    trained = tasks.get("mrpc", tmp_path).read("dev").examples
    assert [e.label for e in trained] == [1, 0]
    assert [r.item for r in predicted(mrpc, task="mrpc")] == texts(trained)
    assert texts(trained) == [TextInput('He said "go', "She went ."), TextInput("A  b .", "C d")]  # no clean-up
    (tmp_path / "CoLA").mkdir()
    cola = tmp_path / "CoLA" / "dev.tsv"
    cola.write_text("src\t1\t\tA fine sentence .\nsrc\t0\t*\tSentence fine a .\n", encoding="utf-8")
    trained = tasks.get("cola", tmp_path).read("dev").examples
    assert [e.label for e in trained] == [1, 0]
    assert [(r.line, r.item) for r in predicted(cola, task="cola")] == [(e.line, t) for e, t in
                                                                        zip(trained, texts(trained), strict=True)]


def test_custom_csv_and_json_lines(tmp_path: Path) -> None:
    csv_file = tmp_path / "train.csv"
    csv_file.write_text('review,title,stars\n"two\nlines",A title,5\nplain,Other,1\n', encoding="utf-8")
    jsonl = tmp_path / "train.jsonl"
    jsonl.write_text('{"review": "fine", "title": "t", "stars": 5}\n\n{"review": "bad", "title": "u", "stars": 1}\n',
                     encoding="utf-8")
    for path in (csv_file, jsonl):
        trained = tasks.custom_task("c", path, path, "review", "stars", "title").read("train").examples
        assert [e.label for e in trained] == [1, 0]  # "1" < "5"
        got = predicted(path, text_column="review", pair_column="title")
        assert [(r.line, r.item) for r in got] == [(e.line, t) for e, t in zip(trained, texts(trained), strict=True)]
    assert [r.line for r in predicted(csv_file, text_column="review", pair_column="title")] == [2, 4]


def test_spoiler_csvs_close_the_markup_gaps_and_give_the_same_context(tmp_path: Path) -> None:
    folder = tmp_path / TVTROPES_DIR
    folder.mkdir(parents=True)
    dev = folder / "dev.csv"
    dev.write_text('1,"He dies  at the end .",1\n2,A fun   show,0\n3,"( So  it goes ) !",1\n4,The end .,0\n',
                   encoding="utf-8")
    task = spoiler_task("tvtropes_spoilers", tmp_path, context_sentences=1, context_after=1)
    trained = task.read("dev").examples
    assert [e.text for e in trained] == ["He dies at the end.", "A fun show", "(So it goes)!", "The end."]
    assert trained[1].text_pair == "He dies at the end. | (So it goes)!" and [e.label for e in trained] == [1, 0, 1, 0]
    assert [r.item for r in predicted(dev, task="tvtropes_spoilers", before=1, after=1)] == texts(trained)
    books = [b for b in (f"Book {i}" for i in range(200)) if in_dev(b)][:2] + ["Book 0", "Book 1"]
    goodreads = tmp_path / GOODREADS_CSV
    goodreads.parent.mkdir(parents=True)
    goodreads.write_text(",book_title,sent_spoil,sentence\n" + "".join(
        f'{i},{book},{i % 2},"Sentence  {i} of {book} ."\n' for i, book in enumerate(books)), encoding="utf-8")
    trained = both_sides(spoiler_task("goodreads_spoilers", tmp_path))
    assert [e.text for e in trained] == [f"Sentence {i} of {book}." for i, book in enumerate(books)]
    assert [e.label for e in trained] == [0, 1, 0, 1]
    got = predicted(goodreads, task="goodreads_spoilers", text_column="sentence")
    assert [(r.line, r.item) for r in got] == [(e.line, t) for e, t in zip(trained, texts(trained), strict=True)]


def test_reviews_and_plain_text(tmp_path: Path) -> None:
    path = tmp_path / GOODREADS_JSONL
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(json.dumps({"review_id": f"r{b}", "book_id": b, "review_sentences": [
        [i % 2, f"Sentence  {i} of {b} ."] for i in range(3)]}) for b in range(40)) + "\n", encoding="utf-8")
    task = spoiler_task("goodreads_spoilers_reviews", tmp_path, context_sentences=1, context_after=1)
    trained = both_sides(task, lambda e: (e.line, e.text))
    assert trained[1].text == "Sentence 1 of 0." and trained[1].text_pair == "Sentence 0 of 0. | Sentence 2 of 0."
    assert [e.label for e in trained] == [i % 2 for _ in range(40) for i in range(3)]
    got = predicted(path, task="goodreads_spoilers_reviews", before=1, after=1)
    assert [r.item for r in got] == texts(trained)
    assert got[4].key == {"review_id": "r1", "sentence": 1}
    plain = tmp_path / "page.txt"  # the TV Tropes page as plain text, one sentence a line
    plain.write_text("He dies  at the end .\nA fun   show\n", encoding="utf-8")
    tv = tmp_path / TVTROPES_DIR / "dev.csv"
    tv.parent.mkdir(parents=True)
    tv.write_text('1,"He dies  at the end .",1\n2,A fun   show,0\n', encoding="utf-8")
    trained = spoiler_task("tvtropes_spoilers", tmp_path, context_sentences=1).read("dev").examples
    assert [r.item for r in predicted(plain, task="tvtropes_spoilers", before=1)] == texts(trained)


def test_squad_json_and_conll(tmp_path: Path) -> None:
    from helpers_serve import squad_doc, write_conll

    doc = squad_doc(4)
    (tmp_path / "train.json").write_text(json.dumps(doc), encoding="utf-8")
    dev = tmp_path / "dev.json"
    dev.write_text(json.dumps(doc), encoding="utf-8")
    trained = squad_task(tmp_path, train_file=str(tmp_path / "train.json"), dev_file=str(dev)).read("dev").examples
    assert all(e.answers and e.context[e.answers[0].start:].startswith(e.answers[0].text) for e in trained)
    assert [r.item for r in predicted(dev, Head.SPAN)] == [QAInput(e.question, e.context, e.id) for e in trained]
    folder = tmp_path / "conll2003"
    folder.mkdir()
    for name in ("train.txt", "valid.txt", "test.txt"):
        write_conll(folder / name, 5)
    sentences = tasks.get("conll2003", tmp_path).read("dev").examples
    assert all(len(s.tags) == len(s.tokens) for s in sentences)
    got = predicted(folder / "valid.txt", Head.TOKEN)
    assert [(r.line, r.item) for r in got] == [(s.line, TokensInput(s.tokens)) for s in sentences]


def test_a_bad_row_is_one_message_raised_by_training_and_recorded_or_raised_by_predict(tmp_path: Path) -> None:
    (tmp_path / "SST-2").mkdir()
    path = tmp_path / "SST-2" / "dev.tsv"
    path.write_text("sentence\tlabel\nfine .\t1\n  \t0\nbad .\t0\n", encoding="utf-8")
    with pytest.raises(DataError) as trained:
        tasks.get("sst2", tmp_path).read("dev")
    assert str(trained.value) == f"{path.resolve()}:3: empty text in column 'sentence'"
    kept = predicted(path.resolve(), task="sst2", policy=Policy("skip", labels=False))
    assert [r.error for r in kept] == [None, str(trained.value), None]
    assert [r.item for r in kept if r.error is None] == [TextInput("fine ."), TextInput("bad .")]
    with pytest.raises(DataError) as raised:
        predicted(path.resolve(), task="sst2")
    assert str(raised.value) == str(trained.value) + SKIP_HINT
