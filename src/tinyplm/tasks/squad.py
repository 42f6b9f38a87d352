"""SQuAD v1.1 / v2.0: read the official JSON, check every answer, split by article.

The official files are read unchanged (``data[].paragraphs[].context/qas[]``; v2.0 adds
``is_impossible``). Every answer's ``answer_start`` must point at its text inside the context:
a mismatch is a :class:`DataError` naming the file and the question id.

Only the official dev-v1.1 file is in ``../shared/data/squad`` (48 articles, 10,570 questions),
so the CPU-sized default splits it by article, deterministically: the first
:data:`TRAIN_ARTICLES` (38) articles in file order are for training, the remaining 10 for
evaluation. No paragraph or question is in both. Where a user has the official train and dev
files, they are used as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinyplm.errors import DataError
from tinyplm.tasks.heads import Head
from tinyplm.tasks.io import encodable
from tinyplm.tasks.json_layout import Layout, json_path, problem, validate
from tinyplm.tasks.readers.jsonl import read_json_document
from tinyplm.tasks.readers.rows import Line, Row, RowError, file_lines, items

TRAIN_ARTICLES = 38


@dataclass(frozen=True)
class Answer:
    text: str
    start: int  # character offset in the context


@dataclass(frozen=True)
class QAExample:
    """One question on one context; ``answers`` empty means unanswerable (v2.0)."""

    id: str
    question: str
    context: str
    answers: tuple[Answer, ...]
    title: str = ""

    @property
    def is_impossible(self) -> bool:
        return not self.answers


@dataclass(frozen=True)
class SquadFile:
    """A parsed SQuAD file: its articles (title -> examples in file order) and version."""

    path: Path
    version: str
    articles: list[tuple[str, list[QAExample]]]

    @property
    def examples(self) -> list[QAExample]:
        return [ex for _, exs in self.articles for ex in exs]

    @property
    def v2(self) -> bool:
        return self.version.lstrip("v").startswith("2") or any(ex.is_impossible for ex in self.examples)

    def raw(self) -> dict:
        """This file (or a part of it) in the official layout, for ``evaluate-squad``."""
        data = []
        for title, exs in self.articles:
            paras: dict[str, list] = {}
            for ex in exs:
                paras.setdefault(ex.context, []).append(
                    {"id": ex.id, "question": ex.question, "is_impossible": ex.is_impossible,
                     "answers": [{"text": a.text, "answer_start": a.start} for a in ex.answers]})
            data.append({"title": title, "paragraphs": [{"context": c, "qas": q} for c, q in paras.items()]})
        return {"version": self.version, "data": data}


class _Answer(Layout):
    text: str
    answer_start: int


class _Query(Layout):
    """A question read for prediction: answers, if any, are not read."""

    id: str | int | None = None
    question: str


class _Question(Layout):
    """A question read for training: its id and answers are required."""

    id: str
    question: str
    answers: list[_Answer]
    is_impossible: bool = False  # v2.0 only


class _Paragraph(Layout):
    context: str
    qas: list[Any]  # each question is checked on its own (:func:`squad_articles`)


class _Article(Layout):
    title: str | None = None
    paragraphs: list[_Paragraph]


class _Squad(Layout):
    """The official v1.1 / v2.0 layout: ``{"version", "data": [{"title", "paragraphs": [{"context",
    "qas": [{"id", "question", "answers": [{"text", "answer_start"}], "is_impossible"}]}]}]}``."""

    version: str = ""
    data: list[_Article]


def read_squad_document(lines: Iterable[Line], name: Path | str) -> _Squad:
    """The skeleton of an official SQuAD document (``data[].paragraphs[].context/qas``); raises
    ``DataError`` naming ``name`` (and line:column, or the JSON path) when it is not UTF-8 JSON in
    that layout."""
    return validate(_Squad, read_json_document(lines, str(name)), name)


def read_squad(path: Path) -> SquadFile:
    """Parse an official SQuAD JSON file (v1.1 or v2.0 layout).

    Raises ``DataError`` naming the file when it is missing, not UTF-8, not JSON (with line and
    column) or holds no question, and naming the JSON path (``data[0].paragraphs[3].qas[6]...``)
    for a value of the wrong type, a missing key, an empty text, a repeated question id, or an
    answer whose ``answer_start`` does not point at its text in the context.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: SQuAD file not found")
    doc = read_squad_document(file_lines(path), path)
    articles = [(title, items(rows)) for title, rows in squad_articles(doc, path, labels=True)]
    if not any(exs for _, exs in articles):
        raise DataError(f"{path}: holds no questions (expected data[].paragraphs[].qas[])")
    return SquadFile(path, doc.version, articles)


def squad_articles(doc: _Squad, name: Path | str, labels: bool) -> Iterator[tuple[str, list[Row]]]:
    """``(title, rows)`` per article of ``doc``: one row per question (``line`` 0, ``where`` its JSON
    path), its item a :class:`QAExample`; with ``labels`` its id and answers are required and
    checked. A bad question, or one of an empty context, is an error row naming its JSON path."""
    seen: dict[str, str] = {}
    v1 = doc.version.lstrip("v").startswith("1")
    for a, article in enumerate(doc.data):
        title = article.title if article.title is not None else f"article-{a}"
        rows = []
        for p, para in enumerate(article.paragraphs):
            problem_of_context = _text_problem(para.context, f"data[{a}].paragraphs[{p}].context")
            for q, raw in enumerate(para.qas):
                loc = ("data", a, "paragraphs", p, "qas", q)
                where = f"{name}: {json_path(loc)}"
                try:
                    if problem_of_context:
                        raise RowError(problem_of_context)
                    item = _question(raw, para.context, title, loc, seen, labels, v1)
                except RowError as exc:
                    rows.append(Row(0, where, error=f"{name}: {exc}"))
                else:
                    rows.append(Row(0, where, item))
        yield title, rows


def _text_problem(text: str, where: str) -> str | None:
    """What is wrong with a text at ``where`` (empty, or one no tokenizer can take), else None."""
    if not text.strip():
        return f"{where}: empty text"
    if not encodable(text):
        return f"{where}: holds an unpaired surrogate escape (\\ud800-\\udfff); fix the escape"
    return None


def _question(raw: Any, context: str, title: str, loc: tuple, seen: dict[str, str], labels: bool,
              v1: bool = False) -> QAExample:
    """One checked question at ``loc`` (its id unique in the file; with ``labels`` its answers inside
    the context, at least one in a ``v1`` file); raises :class:`RowError` naming the JSON path."""
    layout, where = (_Question if labels else _Query), json_path(loc)
    wrong = problem(layout, raw, loc)
    if wrong:
        raise RowError(wrong)
    qa = layout.model_validate(raw)
    ident = None if qa.id is None else str(qa.id)
    for text, at in ((ident, f"{where}.id"), (qa.question, f"{where}.question")):
        wrong = _text_problem(text, at) if text is not None else None
        if wrong:
            raise RowError(wrong)
    if ident is not None and ident in seen:
        raise RowError(f"{where}.id: question id {ident!r} is used twice (first at {seen[ident]})")
    if ident is not None:
        seen[ident] = where
    answers = _answers(qa, context, where, v1) if labels else ()
    return QAExample(ident or "", qa.question, context, answers, title)


def _answers(qa: _Question, context: str, where: str, v1: bool = False) -> tuple[Answer, ...]:
    """The answers of ``qa``, each checked to stand at its ``answer_start`` in ``context``; none is
    refused in a ``v1`` file (v1.1 has no unanswerable question: its scoring would count it wrong
    whatever the answer, and the file would be read as v2.0)."""
    answers = []
    for k, ans in enumerate(qa.answers):
        wrong = _text_problem(ans.text, f"{where}.answers[{k}].text")
        if wrong:
            raise RowError(wrong)
        found = context[ans.answer_start : ans.answer_start + len(ans.text)] if ans.answer_start >= 0 else ""
        if found != ans.text:
            raise RowError(f"{where}.answers[{k}]: answer {ans.text[:60]!r} is not at answer_start "
                           f"{ans.answer_start} of its context (found {found[:60]!r}; question {qa.id})")
        answers.append(Answer(ans.text, ans.answer_start))
    if v1 and not answers:
        raise RowError(f"{where}.answers: empty (question {qa.id}), but the file's version is 1.x, whose questions "
                       "all have answers; give its answers, or mark the file version 2.0 and the question "
                       "is_impossible: true")
    if qa.is_impossible and answers:
        raise RowError(f"{where}: is_impossible is true but it has {len(answers)} answer(s) (question {qa.id})")
    return tuple(answers)


def split_by_article(data: SquadFile, train_articles: int = TRAIN_ARTICLES) -> tuple[SquadFile, SquadFile]:
    """The first ``train_articles`` articles (file order) for training, the rest for evaluation.

    Raises ``DataError`` when either part would hold no article or no question.
    """
    n = len(data.articles)
    if not 0 < train_articles < n:
        raise DataError(f"{data.path}: cannot keep {train_articles} of {n} articles for training "
                        "and evaluate on the rest")
    train = SquadFile(data.path, data.version, data.articles[:train_articles])
    held_out = SquadFile(data.path, data.version, data.articles[train_articles:])
    parts = ((train, f"the first {train_articles} articles (for training)"),
             (held_out, f"the {n - train_articles} articles after the first {train_articles} (for evaluation)"))
    for part, what in parts:
        if not part.examples:
            raise DataError(f"{data.path}: cannot split by article: {what} hold no questions")
    return train, held_out


#: Where the default data lives, under the data root (``../shared/data``).
SQUAD_DIR = "squad"
DEV_V11 = "dev-v1.1.json"


def squad_task(data_root: Path, *, version: str = "1.1", train_file: str | None = None, dev_file: str | None = None,
               train_articles: int = TRAIN_ARTICLES, doc_stride: int = 128, max_query_length: int = 64):
    """SQuAD as a :class:`~tinyplm.tasks.base.Task` with a span head.

    With ``train_file`` and ``dev_file`` (the official files, or any in their layout) both are
    read unchanged; so are the official ``train-v1.1.json``/``dev-v1.1.json`` (v2.0:
    ``-v2.0``) under ``data_root/squad`` when the train file is there. Otherwise (v1.1) the
    official dev file is split by article (:func:`split_by_article`): ``train`` is its first
    ``train_articles`` articles and ``dev`` the rest. Metrics are EM and F1 in percent (F1 first,
    the primary).
    """
    from tinyplm.errors import RecipeError
    from tinyplm.tasks.base import Task

    v2 = version.startswith("2")
    options = {"doc_stride": doc_stride, "max_query_length": max_query_length, "v2": v2}
    if bool(train_file) != bool(dev_file):
        raise RecipeError("task: give both train_file and dev_file (the official SQuAD files), or neither")
    folder = data_root / SQUAD_DIR if (data_root / SQUAD_DIR).is_dir() else data_root
    suffix = "2.0" if v2 else "1.1"
    official = {"train": folder / f"train-v{suffix}.json", "dev": folder / f"dev-v{suffix}.json"}
    if not train_file and (v2 or official["train"].is_file()):  # the official pair, where a user has it
        train_file, dev_file = str(official["train"]), str(official["dev"])
    if train_file and dev_file:
        files = {"train": Path(train_file), "dev": Path(dev_file)}
        reader = lambda path, split: read_squad(path).examples  # noqa: E731
        what = f"SQuAD v{version}: {files['train'].name} for training, {files['dev'].name} for evaluation"
    else:
        path = official["dev"]
        files = {"train": path, "dev": path}

        def reader(p: Path, split: str) -> list[QAExample]:
            train, held_out = split_by_article(read_squad(p), train_articles)
            return (train if split == "train" else held_out).examples

        what = f"SQuAD v1.1 dev split by article: {train_articles} to train, the rest to evaluate"
    return Task(name="squad_v2" if v2 else "squad", labels=(), is_regression=False,
                metrics=("f1", "exact" if v2 else "exact_match"), files=files, reader=reader,
                description=what, collection="SQuAD", head=Head.SPAN, options=options)
