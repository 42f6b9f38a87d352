"""The data an embedding model is judged on: scored text pairs (similarity) and retrieval sets.

- :func:`stsb_pairs`: GLUE STS-B's ``dev.tsv`` (or train), sentence1, sentence2 and a score in [0, 5];
- :func:`read_pairs`: your own pairs file, CSV/TSV with a header or JSON lines
  (:mod:`tinyplm.tasks.readers.pairs` lists the accepted names);
- :func:`squad_retrieval`: an official SQuAD file as retrieval: every ``paragraphs[].context`` is a
  document (in file order), each question's own paragraph its one relevant one;
- :func:`read_beir`: a folder in the BEIR layout (:mod:`tinyplm.tasks.readers.beir`).

Every loader raises :class:`~tinyplm.errors.DataError` naming the file and line (or JSON path) of
the first bad record. A retrieval set keeps only the queries with a relevant document (a qrels
score above 0) and counts the others in :attr:`RetrievalSet.dropped`, as BEIR leaves them out.

:func:`embedding_split` makes either kind of set an eval split of the embedding head: every distinct
text once (so a run encodes and times them as it does any split), the set itself in the split's
options, from which the metrics are computed on the model's vectors
(``tinyplm.evaluate.embedding.set_metrics``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tinyplm.errors import DataError
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.glue import GLUE_SPECS, read_glue_file
from tinyplm.tasks.heads import Head
from tinyplm.tasks.io import at, no_examples, quoted
from tinyplm.tasks.readers.beir import Judgment, Record, read_judgments, read_records
from tinyplm.tasks.readers.fields import check_text
from tinyplm.tasks.readers.pairs import read_pair_rows
from tinyplm.tasks.readers.rows import RowError, file_lines, items
from tinyplm.tasks.squad import read_squad_document, squad_articles


@dataclass(frozen=True)
class ScoredPairs:
    """Text pairs with a gold similarity score each: ``texts_a[i]``, ``texts_b[i]``, ``scores[i]``;
    ``source`` is the file read. Raises ``DataError`` when the three lengths differ, there are
    fewer than two pairs, or every pair has the same score (no correlation is defined: a model
    would score 0 on it, whatever its vectors)."""

    texts_a: tuple[str, ...]
    texts_b: tuple[str, ...]
    scores: tuple[float, ...]
    source: Path

    def __post_init__(self) -> None:
        if not len(self.texts_a) == len(self.texts_b) == len(self.scores):
            raise DataError(f"{self.source}: {len(self.texts_a)} first texts, {len(self.texts_b)} second texts and "
                            f"{len(self.scores)} scores; expected one of each per pair")
        if len(self.scores) < 2:
            raise DataError(f"{self.source}: holds {len(self.scores)} pair(s); a correlation needs two or more")
        if len(set(self.scores)) == 1:
            raise DataError(f"{self.source}: all {len(self.scores)} pairs have the score {self.scores[0]:g}; a "
                            "correlation needs pairs of different scores (give graded similarities, e.g. 0 to 5)")

    @classmethod
    def of(cls, examples: Iterable[Example], source: Path) -> ScoredPairs:
        """The pairs of ``examples`` (``text``, ``text_pair``, ``label`` the score)."""
        examples = list(examples)
        return cls(tuple(ex.text for ex in examples), tuple(ex.text_pair for ex in examples),
                   tuple(float(ex.label) for ex in examples), source)


@dataclass(frozen=True)
class RetrievalSet:
    """Queries that rank a corpus, with graded relevance judgments.

    ``queries``: query id -> text; ``corpus``: document id -> text, in the source's order (ties in
    a ranking go to the earlier document); ``qrels``: query id -> {document id: relevance}, 0 being
    judged not relevant. Every query has at least one document of relevance above 0 and every id
    in ``qrels`` is a query or a document of the set. ``dropped``: queries the source held without
    a relevant document, left out (:meth:`of` counts them). ``source``: the file or folder read.
    Raises ``DataError`` naming ``source`` when the parts do not agree.
    """

    queries: dict[str, str]
    corpus: dict[str, str]
    qrels: dict[str, dict[str, int]]
    source: Path
    dropped: int = 0

    def __post_init__(self) -> None:
        if not self.corpus:
            raise DataError(f"{self.source}: the corpus holds no documents")
        if not self.queries:
            raise DataError(f"{self.source}: no query has a relevant document (a qrels score above 0)")
        for query in self.queries:
            if not any(rel > 0 for rel in self.qrels.get(query, {}).values()):
                raise DataError(f"{self.source}: query {quoted(query)} has no relevant document")
        for query, judged in self.qrels.items():
            if query not in self.queries:
                raise DataError(f"{self.source}: qrels name query {quoted(query)}, which is not a query of the set")
            for doc, rel in judged.items():
                if doc not in self.corpus:
                    raise DataError(f"{self.source}: qrels of query {quoted(query)} name document {quoted(doc)}, "
                                    "which is not in the corpus")
                if not isinstance(rel, int) or isinstance(rel, bool) or rel < 0:
                    raise DataError(f"{self.source}: relevance {rel!r} of query {quoted(query)} and document "
                                    f"{quoted(doc)}: expected a whole number of 0 or more")

    @classmethod
    def of(cls, queries: dict[str, str], corpus: dict[str, str], qrels: dict[str, dict[str, int]],
           source: Path) -> RetrievalSet:
        """The set of the ``queries`` that have a relevant document in ``qrels`` (the others are
        left out and counted in ``dropped``, with their qrels)."""
        kept = {query: text for query, text in queries.items()
                if any(rel > 0 for rel in qrels.get(query, {}).values())}
        return cls(kept, corpus, {query: dict(qrels[query]) for query in kept}, source, len(queries) - len(kept))

    @property
    def relevant(self) -> int:
        """The judgments of relevance above 0, over all queries."""
        return sum(rel > 0 for judged in self.qrels.values() for rel in judged.values())


def stsb_pairs(path: Path) -> ScoredPairs:
    """The pairs of a GLUE STS-B file (``dev.tsv``, read as the ``stsb`` task reads it: columns by
    the header's names, no quoting, scores in [0, 5]); raises ``DataError`` naming the file and line."""
    path = Path(path)
    return ScoredPairs.of(read_glue_file(path, "dev", GLUE_SPECS["stsb"]), path)


def read_pairs(path: Path) -> ScoredPairs:
    """The pairs of your own file (:func:`~tinyplm.tasks.readers.pairs.read_pair_rows`); raises
    ``DataError`` naming the file and line of a bad record, or for a file without pairs."""
    path = Path(path)
    examples = items(read_pair_rows(path))
    if not examples:
        raise no_examples(path, "only a header line")
    return ScoredPairs.of(examples, path)


def squad_retrieval(path: Path) -> RetrievalSet:
    """An official SQuAD file (v1.1 or v2.0 layout) as a retrieval set: each ``paragraphs[].context``
    is one document, its id its JSON path (``data[0].paragraphs[3]``), in file order; each question
    (its ``id``, else its JSON path) a query whose one relevant document is its own paragraph.
    Answers are not read. Raises ``DataError`` naming the file and the JSON path of a bad value."""
    path = Path(path)
    document = read_squad_document(file_lines(path), path)
    queries: dict[str, str] = {}
    corpus: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for a, (article, (_, rows)) in enumerate(zip(document.data, squad_articles(document, path, labels=False),
                                                 strict=True)):
        questions = iter(items(rows))
        for p, paragraph in enumerate(article.paragraphs):
            doc = f"data[{a}].paragraphs[{p}]"
            try:
                corpus[doc] = check_text(paragraph.context, f"{doc}.context")
            except RowError as exc:
                raise DataError(f"{path}: {exc}") from None
            for q in range(len(paragraph.qas)):
                question = next(questions)
                query = question.id or f"{doc}.qas[{q}]"
                queries[query] = question.question
                qrels[query] = {doc: 1}
    if not queries:
        raise DataError(f"{path}: holds no questions (expected data[].paragraphs[].qas[])")
    return RetrievalSet.of(queries, corpus, qrels, path)


def read_beir(folder: Path, split: str = "test") -> RetrievalSet:
    """The retrieval set of a folder in the BEIR layout: ``corpus.jsonl``, ``queries.jsonl`` and
    ``qrels/<split>.tsv`` (:mod:`tinyplm.tasks.readers.beir`). Raises ``DataError`` naming the file
    and line of the first bad record, of an id given twice, or of a qrels row whose query or
    document is not in ``queries.jsonl`` or ``corpus.jsonl``."""
    folder = Path(folder)
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not folder.is_dir():
        raise DataError(f"{folder}: BEIR folder not found (expected corpus.jsonl, queries.jsonl and "
                        f"qrels/{split}.tsv in it)")
    if not qrels_path.is_file():
        splits = sorted(p.stem for p in (folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []
        raise DataError(f"{qrels_path}: qrels of split '{split}' not found; splits found: "
                        f"{', '.join(splits) or 'none'}")
    corpus = _by_id(folder / "corpus.jsonl", titled=True)
    queries = _by_id(folder / "queries.jsonl", titled=False)
    judgments = items(read_judgments(file_lines(qrels_path), str(qrels_path)))
    if not judgments:
        raise no_examples(qrels_path, "only a header line; expected query-id, corpus-id, score rows")
    return RetrievalSet.of(queries, corpus, _qrels(judgments, qrels_path, queries, corpus), folder)


def _by_id(path: Path, titled: bool) -> dict[str, str]:
    """id -> text of a ``corpus.jsonl`` or ``queries.jsonl``, in file order; raises ``DataError`` for
    a bad line, an id given twice or a file without records."""
    records: list[Record] = items(read_records(file_lines(path), str(path), titled))
    if not records:
        raise no_examples(path, "expected one JSON object per line with '_id' and 'text'")
    texts: dict[str, str] = {}
    first: dict[str, int] = {}
    for record in records:
        if record.id in texts:
            raise DataError(f"{at(path, record.line)}: _id {quoted(record.id)} is given twice "
                            f"(first at line {first[record.id]})")
        texts[record.id], first[record.id] = record.text, record.line
    return texts


def _qrels(judgments: list[Judgment], path: Path, queries: dict[str, str],
           corpus: dict[str, str]) -> dict[str, dict[str, int]]:
    """query id -> {document id: relevance} of ``judgments``; raises ``DataError`` at the line of the
    first one naming an unknown query or document, or a pair judged twice."""
    qrels: dict[str, dict[str, int]] = {}
    lines: dict[tuple[str, str], int] = {}
    for judgment in judgments:
        where = at(path, judgment.line)
        if judgment.query not in queries:
            raise DataError(f"{where}: query-id {quoted(judgment.query)} is not in queries.jsonl")
        if judgment.doc not in corpus:
            raise DataError(f"{where}: corpus-id {quoted(judgment.doc)} is not in corpus.jsonl")
        pair = (judgment.query, judgment.doc)
        if pair in lines:
            raise DataError(f"{where}: query-id {quoted(judgment.query)} and corpus-id {quoted(judgment.doc)} "
                            f"are judged twice (first at line {lines[pair]})")
        lines[pair] = judgment.line
        qrels.setdefault(judgment.query, {})[judgment.doc] = judgment.relevance
    return qrels


#: The key of an embedding eval split's options that holds its set (:func:`embedding_split`).
SET_OPTION = "set"
#: The key of an embedding split's options that holds the word pieces its texts are encoded at, when
#: not the task's ``max_length`` (an embedding task's eval sets: paragraphs are longer than sentences).
MAX_LENGTH_OPTION = "max_length"
#: The key of an embedding training split's options that holds each example's batching unit id, when
#: some examples are trained side by side (``task.pair_questions``: a question and its passage).
GROUPS_OPTION = "groups"


def set_texts(data: ScoredPairs | RetrievalSet) -> list[str]:
    """Every distinct text of a set, once, in a fixed order: a pairs set's first then second texts;
    a retrieval set's queries, then its documents."""
    if isinstance(data, ScoredPairs):
        return list(dict.fromkeys(data.texts_a + data.texts_b))
    return list(dict.fromkeys([*data.queries.values(), *data.corpus.values()]))


def embedding_split(name: str, data: ScoredPairs | RetrievalSet) -> Split:
    """An eval split of the embedding head: :func:`set_texts` as single-text examples (no labels),
    ``data`` in ``options[SET_OPTION]``."""
    examples = [Example(text, None, None) for text in set_texts(data)]
    return Split(name, examples, data.source, Head.EMBEDDING, {SET_OPTION: data})
