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

import json
from dataclasses import dataclass
from pathlib import Path

from tinyplm.errors import DataError

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


def read_squad(path: Path) -> SquadFile:
    """Parse an official SQuAD JSON file.

    Raises ``DataError`` naming the file (and question id) when it is missing, not JSON, not in
    the SQuAD layout, or an answer's ``answer_start`` does not match its text in the context.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: SQuAD file not found")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a JSON file ({exc})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("data"), list):
        raise DataError(f"{path}: expected the SQuAD layout {{'version': ..., 'data': [articles]}}")
    articles = []
    for a, article in enumerate(raw["data"]):
        title = str(article.get("title", f"article-{a}"))
        exs = []
        for p, para in enumerate(_field(article, "paragraphs", path, f"data[{a}]")):
            context = _field(para, "context", path, f"data[{a}].paragraphs[{p}]")
            for q, qa in enumerate(_field(para, "qas", path, f"data[{a}].paragraphs[{p}]")):
                exs.append(_example(qa, context, title, path, f"data[{a}].paragraphs[{p}].qas[{q}]"))
        articles.append((title, exs))
    return SquadFile(path, str(raw.get("version", "")), articles)


def _field(node, key: str, path: Path, where: str):
    if not isinstance(node, dict) or key not in node:
        raise DataError(f"{path}: {where} has no '{key}' (expected the official SQuAD layout)")
    return node[key]


def _example(qa: dict, context: str, title: str, path: Path, where: str) -> QAExample:
    qid = str(_field(qa, "id", path, where))
    question = str(_field(qa, "question", path, where))
    answers = []
    for ans in qa.get("answers", []):
        text, start = ans.get("text"), ans.get("answer_start")
        if not isinstance(text, str) or not isinstance(start, int):
            raise DataError(f"{path}: question {qid}: an answer needs 'text' (string) and 'answer_start' (int)")
        if context[start : start + len(text)] != text:
            found = context[start : start + len(text)]
            raise DataError(f"{path}: question {qid}: answer {text!r} is not at answer_start {start} "
                            f"of its context (found {found!r})")
        answers.append(Answer(text, start))
    if qa.get("is_impossible") and answers:
        raise DataError(f"{path}: question {qid}: is_impossible but has answers")
    return QAExample(qid, question, context, tuple(answers), title)


def split_by_article(data: SquadFile, train_articles: int = TRAIN_ARTICLES) -> tuple[SquadFile, SquadFile]:
    """The first ``train_articles`` articles (file order) for training, the rest for evaluation.

    Raises ``DataError`` when either part would be empty.
    """
    n = len(data.articles)
    if not 0 < train_articles < n:
        raise DataError(f"{data.path}: cannot keep {train_articles} of {n} articles for training and evaluate on the rest")
    return (SquadFile(data.path, data.version, data.articles[:train_articles]),
            SquadFile(data.path, data.version, data.articles[train_articles:]))


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
    official = {"train": folder / f"train-v{'2.0' if v2 else '1.1'}.json", "dev": folder / f"dev-v{'2.0' if v2 else '1.1'}.json"}
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
                description=what, family="SQuAD", head="span", options=options)
