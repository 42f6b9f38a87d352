"""Spoiler tasks on tiny files: the by-book dev split, the three readers, their errors, and the
refusal of a dev split whose single class leaves ROC AUC undefined."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tinyplm.errors import DataError
from tinyplm.tasks.spoilers import (
    DEV_FRACTION,
    GOODREADS_CSV,
    GOODREADS_JSONL,
    TVTROPES_DIR,
    close_markup_gaps,
    in_dev,
    read_goodreads_csv,
    read_goodreads_jsonl,
    read_tvtropes_csv,
    spoiler_task,
)

BOOKS = [f"Book {i}" for i in range(300)]


def _goodreads_csv(path: Path, books: list[str], per_book: int = 2) -> Path:
    rows = [",book_title,sent_spoil,sentence"]
    n = 0
    for book in books:
        for _ in range(per_book):
            rows.append(f'{n},"{book}",{n % 2},"Sentence {n} about {book}, with a comma."')
            n += 1
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _tvtropes_files(root: Path, text: str) -> None:
    """The same header-less ``text`` as TV Tropes train and dev files under the data ``root``."""
    (root / TVTROPES_DIR).mkdir(parents=True)
    for split in ("train", "dev"):
        (root / TVTROPES_DIR / f"{split}.csv").write_text(text, encoding="utf-8")


def test_the_by_book_split_keeps_every_book_on_one_side_and_is_deterministic(tmp_path: Path) -> None:
    path = _goodreads_csv(tmp_path / "train.csv", BOOKS)
    train, dev = read_goodreads_csv(path, "train"), read_goodreads_csv(path, "dev")
    book_of = lambda ex: ex.text.split(" about ")[1].removesuffix(", with a comma.")  # noqa: E731
    assert len(train) + len(dev) == 2 * len(BOOKS)
    assert not {book_of(e) for e in train} & {book_of(e) for e in dev}  # no book on both sides
    assert all(in_dev(book_of(e)) for e in dev) and not any(in_dev(book_of(e)) for e in train)
    assert abs(len(dev) / (2 * len(BOOKS)) - DEV_FRACTION) < 0.06  # about the fraction asked
    again = read_goodreads_csv(path, "dev")
    assert [(e.text, e.label, e.line) for e in again] == [(e.text, e.label, e.line) for e in dev]
    # A book's side depends on its title only, not on the file around it.
    alone = _goodreads_csv(tmp_path / "one.csv", BOOKS[:40])
    assert {e.text for e in read_goodreads_csv(alone, "dev")} <= {e.text for e in dev}
    assert in_dev(" Book 3 ") == in_dev("Book 3")  # titles are compared stripped


def test_goodreads_csv_finds_columns_by_name_and_names_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "g.csv"
    path.write_text('sentence,sent_spoil,book_title,extra\n"He  dies .",1,Dune,x\n', encoding="utf-8")
    both = read_goodreads_csv(path, "dev" if in_dev("Dune") else "train")
    assert [(e.text, e.label, e.line) for e in both] == [("He dies.", 1, 2)]  # the markup gaps closed
    path.write_text(",book_title,sent_spoil,sentence\n0,Dune,2,He dies.\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"g.csv:2: .*'2'"):
        read_goodreads_csv(path, "train")
    path.write_text(",book_title,sentence\n0,Dune,He dies.\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"g.csv.*sent_spoil"):
        read_goodreads_csv(path, "train")
    path.write_text(",book_title,sent_spoil,sentence\n0,Dune,1,   \n", encoding="utf-8")
    with pytest.raises(DataError, match=r"g.csv:2: .*sentence"):
        read_goodreads_csv(path, "train")


def test_tvtropes_rows_without_a_header(tmp_path: Path) -> None:
    path = tmp_path / "dev.csv"
    path.write_text('1,"He dies  at the end , sadly .",1\n2,A fun show,0\n\n3,Another,1\n', encoding="utf-8")
    got = read_tvtropes_csv(path, "dev")  # the markup gaps closed
    assert [(e.text, e.label, e.line) for e in got] == [("He dies at the end, sadly.", 1, 1), ("A fun show", 0, 2),
                                                        ("Another", 1, 4)]
    path.write_text("1,A fun show\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"dev.csv:1: expected 3 comma-separated fields, got 2"):
        read_tvtropes_csv(path, "dev")


def test_tvtropes_context_is_the_sentences_before_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "dev.csv"
    path.write_text('1,"A  show .",0\n2,He dies,1\n\n3,Then   she does .,1\n4,The end,0\n', encoding="utf-8")
    got = read_tvtropes_csv(path, "dev", context_sentences=2)  # closed gaps in the context too
    assert [e.text_pair for e in got] == [None, "A show.", "A show. He dies", "He dies Then she does."]
    alone = read_tvtropes_csv(path, "dev")
    assert [(e.text, e.label, e.line) for e in got] == [(e.text, e.label, e.line) for e in alone]
    task = spoiler_task("tvtropes_spoilers", tmp_path, context_sentences=1)
    assert task.info == {"context_sentences": 1} and not spoiler_task("tvtropes_spoilers", tmp_path).info


def test_context_after_adds_the_sentences_after_past_a_mark(tmp_path: Path) -> None:
    """context_after: M puts the M following sentences after the mark, which stays when a side is
    empty (first and last lines), so the model can tell before from after."""
    from tinyplm.tasks.spoilers import AFTER_MARK, page_context

    path = tmp_path / "dev.csv"
    path.write_text('1,"A  show .",0\n2,He dies,1\n3,Then   she does .,1\n4,The end,0\n', encoding="utf-8")
    got = read_tvtropes_csv(path, "dev", context_sentences=1, context_after=2)
    assert AFTER_MARK == "|"
    assert [e.text_pair for e in got] == ["| He dies Then she does.", "A show. | Then she does. The end",
                                          "He dies | The end", "Then she does. |"]
    only_after = read_tvtropes_csv(path, "dev", context_after=1)
    assert [e.text_pair for e in only_after] == ["| He dies", "| Then she does.", "| The end", None]
    assert page_context(["alone"], 0, 2, 2) is None and page_context(["a", "b"], 1, 2) == "a"
    assert [(e.text, e.label) for e in got] == [(e.text, e.label) for e in read_tvtropes_csv(path, "dev")]
    task = spoiler_task("tvtropes_spoilers", tmp_path, context_sentences=1, context_after=2)
    assert task.info == {"context_sentences": 1, "context_after": 2}
    reviews = spoiler_task("goodreads_spoilers_reviews", tmp_path, context_after=1)
    assert reviews.info["context_after"] == 1


def test_context_is_refused_for_a_task_without_preceding_sentences(tmp_path: Path) -> None:
    from tinyplm.config import TaskSpec
    from tinyplm.errors import RecipeError
    from tinyplm.run import load_task

    root = tmp_path / "data"
    _goodreads_csv(root / GOODREADS_CSV, BOOKS[:100])
    _tvtropes_files(root, "1,A show,0\n2,He dies,1\n3,Not him,0\n")
    tv = load_task(TaskSpec(name="tvtropes_spoilers", data_dir=str(root), context_sentences=2))
    assert [e.text_pair for e in tv.evals["dev"].examples] == [None, "A show", "A show He dies"]
    with pytest.raises(RecipeError, match="task.context_sentences is for goodreads_spoilers_reviews and "
                                          "tvtropes_spoilers.*'goodreads_spoilers'"):
        load_task(TaskSpec(name="goodreads_spoilers", data_dir=str(root), context_sentences=2))
    with pytest.raises(RecipeError, match="task.context_after is for goodreads_spoilers_reviews"):
        load_task(TaskSpec(name="goodreads_spoilers", data_dir=str(root), context_after=1))
    around = load_task(TaskSpec(name="tvtropes_spoilers", data_dir=str(root), context_after=1))
    assert [e.text_pair for e in around.evals["dev"].examples] == ["| He dies", "| Not him", None]


@pytest.mark.parametrize(("raw", "closed"), [
    ("Dukat becomes this after   Ziyal's death .", "Dukat becomes this after Ziyal's death."),
    (" Inspired By  the film\tAlice .  ", "Inspired By the film Alice."),
    ("( NOT  a  Rube Goldberg Device ) , then [ this ] !", "(NOT a Rube Goldberg Device), then [this]!"),
    ("Dr. Who's \"finale\": 3 . 5 stars; a-ha", "Dr. Who's \"finale\": 3. 5 stars; a-ha"),
    ("Plain text, as a reader writes it.", "Plain text, as a reader writes it."),
])
def test_closing_markup_gaps_keeps_words_and_marks(raw: str, closed: str) -> None:
    assert close_markup_gaps(raw) == closed
    assert close_markup_gaps(closed) == closed  # idempotent: clean text is left as it is
    from tinyplm.models.classic.words import words
    assert words(closed) == words(raw)  # the word tokenizer sees the same tokens either way


def test_the_shipped_tvtropes_text_has_markup_gaps_and_the_task_reads_it_without(shared_data: Path) -> None:
    """The raw files have gaps (a run of 3+ spaces, a space before a full stop) in a sizeable
    share of sentences; the task's examples have none, and the same rows in the same order."""
    from tinyplm.tasks.spoilers import csv_rows

    for split in ("train", "dev"):
        path = shared_data / TVTROPES_DIR / f"{split}.csv"
        raw = [fields[1] for _, fields in csv_rows(path)]
        assert sum("   " in t for t in raw) > len(raw) // 20 and sum(" ." in t for t in raw) > len(raw) // 20
        got = spoiler_task("tvtropes_spoilers", shared_data).read(split).examples
        assert [e.text for e in got] == [close_markup_gaps(t) for t in raw]
        assert not any("  " in e.text or " ." in e.text or e.text != e.text.strip() for e in got)


def _review(book: int, labels: list[int], review_id: str = "r") -> str:
    return json.dumps({"review_id": f"{review_id}{book}", "book_id": book, "user_id": "u", "rating": 4,
                       "review_sentences": [[lab, f"Sentence {i} of book {book}."] for i, lab in enumerate(labels)]})


def test_the_reviews_reader_reads_the_original_layout_with_context(tmp_path: Path) -> None:
    path = tmp_path / "goodreads.jsonl"
    path.write_text("\n".join(_review(b, [0, 1, 0]) for b in range(60)) + "\n", encoding="utf-8")
    train = read_goodreads_jsonl(path, "train", context_sentences=2)
    dev = read_goodreads_jsonl(path, "dev", context_sentences=2)
    assert len(train) + len(dev) == 180 and dev and train
    dev_books = {e.text.split("book ")[1] for e in dev}
    assert not dev_books & {e.text.split("book ")[1] for e in train}
    first = [e for e in train if e.line == train[0].line]
    assert [e.text_pair for e in first] == [None, first[0].text, f"{first[0].text} {first[1].text}"]
    assert [e.label for e in first] == [0, 1, 0]
    plain = read_goodreads_jsonl(path, "train")
    assert all(e.text_pair is None for e in plain)
    gappy = json.dumps({"book_id": 1, "review_sentences": [[0, "A  good read ."], [1, "Then   she dies !"]]})
    path.write_text(gappy + "\n", encoding="utf-8")
    got = read_goodreads_jsonl(path, "dev" if in_dev("1") else "train", context_sentences=1)
    assert [(e.text, e.text_pair) for e in got] == [("A good read.", None), ("Then she dies!", "A good read.")]
    around = read_goodreads_jsonl(path, "dev" if in_dev("1") else "train", context_sentences=1, context_after=1)
    assert [e.text_pair for e in around] == ["| Then she dies!", "A good read. |"]  # within its own review


@pytest.mark.parametrize(("line", "message"), [
    ('{"book_id": 1}', "missing key 'review_sentences'"),
    ('{"review_sentences": [[0, "a"]]}', "missing key 'book_id'"),
    ('{"book_id": 1, "review_sentences": [[2, "a"]]}', r"review_sentences\[0\]: label '2' is not one of 0, 1"),
    ('{"book_id": 1, "review_sentences": [[0, " "]]}', r"review_sentences\[0\]: empty sentence"),
    ('{"book_id": 1, "review_sentences": [[0]]}', r"review_sentences\[0\] should be \[label, sentence\]"),
    ("[1, 2]", "expected a JSON object"),
    ("{not json", "not valid JSON"),
])
def test_the_reviews_reader_names_the_line_of_a_bad_review(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "goodreads.jsonl"
    path.write_text(_review(1, [0, 1]) + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=f"goodreads.jsonl:2: .*{message}"):
        read_goodreads_jsonl(path, "train")


def test_a_dev_side_of_one_class_is_refused_when_loading(tmp_path: Path) -> None:
    """ROC AUC is undefined on a dev split of one class: refused when the data is read, before any
    training, naming the file."""
    root = tmp_path / "data"
    (root / GOODREADS_JSONL).parent.mkdir(parents=True)
    lines = [_review(b, [0, 0] if in_dev(str(b)) else [0, 1]) for b in range(60)]
    (root / GOODREADS_JSONL).write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="goodreads.jsonl: the dev split .* all of class not_spoiler; roc_auc needs"):
        spoiler_task("goodreads_spoilers_reviews", root).load()
    lines = [_review(b, [0, 1]) for b in range(60)]
    (root / GOODREADS_JSONL).write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = spoiler_task("goodreads_spoilers_reviews", root, context_sentences=1).load()
    assert data.primary_metric == "roc_auc" and data.class_weights is not None
    assert {e.label for e in data.evals["dev"].examples} == {0, 1}


def test_tasks_find_their_files_under_the_data_root(tmp_path: Path) -> None:
    root = tmp_path / "data"
    _goodreads_csv(root / GOODREADS_CSV, BOOKS[:100])
    _tvtropes_files(root, "1,A show,0\n2,He dies,1\n")
    goodreads = spoiler_task("goodreads_spoilers", root).load()
    assert goodreads.metrics[0] == "roc_auc" and "dev_split" in goodreads.info
    tv = spoiler_task("tvtropes_spoilers", root).load()
    assert tv.primary_metric == "accuracy" and len(tv.evals["dev"].examples) == 2


def test_evaluate_gives_a_reviews_model_the_context_it_was_trained_with(tmp_path: Path) -> None:
    """`tinyplm evaluate` reads context_sentences from the model's stamp, as predict does; the
    option overrides it. Metrics equal the library's on the task read with that context."""
    from transformers import AutoConfig

    from conftest import make_tiny_model_dir
    from helpers_cli import cli
    from tinyplm.config import TaskSpec
    from tinyplm.evaluate.model_eval import encode_evals, evaluate_model
    from tinyplm.models import load_classifier
    from tinyplm.run import load_task

    root = tmp_path / "data"
    (root / GOODREADS_JSONL).parent.mkdir(parents=True)
    (root / GOODREADS_JSONL).write_text("\n".join(_review(b, [0, 1, 0, 1]) for b in range(60)) + "\n",
                                        encoding="utf-8")
    model_dir = make_tiny_model_dir(tmp_path / "m")
    cfg = AutoConfig.from_pretrained(model_dir)
    cfg.tinyplm_task = {"name": "goodreads_spoilers_reviews", "max_length": 32, "context_sentences": 2}
    cfg.save_pretrained(model_dir)

    def expected(context: int) -> dict:
        data = load_task(TaskSpec(name="goodreads_spoilers_reviews", data_dir=str(root), max_length=32,
                                  context_sentences=context))
        model, tok = load_classifier(model_dir, data.labels, False)
        return evaluate_model(model, data, encode_evals(data, tok, 32))

    args = ["evaluate", "m", "--task", "goodreads_spoilers_reviews", "--data-dir", root, "--max-length", "32", "--json"]
    stamped = cli(args, cwd=tmp_path)
    assert stamped.returncode == 0, stamped.output
    got = json.loads(stamped.stdout)
    assert got["context_sentences"] == 2 and got["metrics"] == pytest.approx(expected(2))
    none = json.loads(cli([*args, "--context-sentences", "0"], cwd=tmp_path).stdout)
    assert none["context_sentences"] == 0 and none["metrics"] == pytest.approx(expected(0))
    assert expected(0) != expected(2)  # the context changes what the model sees


def test_evaluate_and_bench_read_a_tvtropes_model_as_it_was_trained(tmp_path: Path) -> None:
    """Without --max-length and --context-sentences, `tinyplm evaluate` uses the model's own (from
    its config stamp): the metrics equal the library's on the task read that way; bench resolves
    the same settings from its first model."""
    from transformers import AutoConfig

    from conftest import make_tiny_model_dir
    from helpers_cli import cli
    from tinyplm.cli.evaluate import as_trained
    from tinyplm.config import TaskSpec
    from tinyplm.evaluate.model_eval import encode_evals, evaluate_model
    from tinyplm.models import load_classifier
    from tinyplm.run import load_task

    root = tmp_path / "data"
    lines = [f"{i},Sentence number {i} of a page about show {i // 5},{(i // 3) % 2}" for i in range(1, 41)]
    _tvtropes_files(root, "\n".join(lines) + "\n")
    model_dir = make_tiny_model_dir(tmp_path / "m")
    cfg = AutoConfig.from_pretrained(model_dir)
    cfg.tinyplm_task = {"name": "tvtropes_spoilers", "max_length": 24, "context_sentences": 2}
    cfg.save_pretrained(model_dir)

    def expected(context: int, length: int) -> dict:
        data = load_task(TaskSpec(name="tvtropes_spoilers", data_dir=str(root), max_length=length,
                                  context_sentences=context))
        model, tok = load_classifier(model_dir, data.labels, False)
        return evaluate_model(model, data, encode_evals(data, tok, length))

    result = cli(["evaluate", "m", "--task", "tvtropes_spoilers", "--data-dir", root, "--json"], cwd=tmp_path)
    assert result.returncode == 0, result.output
    got = json.loads(result.stdout)
    assert got["context_sentences"] == 2 and got["metrics"] == pytest.approx(expected(2, 24))
    assert expected(0, 24) != expected(2, 24)
    assert as_trained(model_dir, "tvtropes_spoilers", None, None, None) == (24, 2, 0)
    assert as_trained(model_dir, "tvtropes_spoilers", 64, 0, 1) == (64, 0, 1)
    assert as_trained(model_dir, "sst2", None, None, None) == (24, 0, 0)  # context only for the tasks taking it
    assert as_trained(tmp_path / "not-a-model", "tvtropes_spoilers", None, None, None) == (128, 0, 0)
    cfg.tinyplm_task = {"name": "tvtropes_spoilers", "max_length": 24, "context_sentences": 1, "context_after": 3}
    cfg.save_pretrained(model_dir)
    assert as_trained(model_dir, "tvtropes_spoilers", None, None, None) == (24, 1, 3)
    assert as_trained(model_dir, "tvtropes_spoilers", None, 2, None) == (24, 2, 3)  # each setting on its own


def test_held_out_sentences_are_whole_books_and_context_without_books_is_refused(tmp_path: Path) -> None:
    """task.holdout drew single sentences: most held-out Goodreads sentences had their book trained
    on, and with context every held-out TV Tropes sentence was trained on in its neighbours' pairs."""
    from tinyplm.config import TaskSpec
    from tinyplm.errors import RecipeError
    from tinyplm.run import load_task
    from tinyplm.tasks.holdout import HOLDOUT

    root = tmp_path / "data"
    _goodreads_csv(root / GOODREADS_CSV, BOOKS[:100], per_book=3)
    data = load_task(TaskSpec(name="goodreads_spoilers", data_dir=str(root), holdout=20))
    held = {e.group for e in data.evals[HOLDOUT].examples}
    assert len(data.evals[HOLDOUT].examples) >= 20 and not held & {e.group for e in data.train.examples}
    assert all(e.group and e.group in e.text for e in data.evals[HOLDOUT].examples)  # the sentence's own book
    _tvtropes_files(root, "".join(f"{i},Sentence {i},{i % 2}\n" for i in range(1, 41)))
    assert HOLDOUT in load_task(TaskSpec(name="tvtropes_spoilers", data_dir=str(root), holdout=4)).evals
    with pytest.raises(RecipeError, match="task.holdout: task 'tvtropes_spoilers' reads each sentence with its "
                                          "neighbours.*names no page"):
        load_task(TaskSpec(name="tvtropes_spoilers", data_dir=str(root), holdout=4, context_sentences=1))
