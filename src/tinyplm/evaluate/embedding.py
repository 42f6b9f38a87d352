"""How good an embedding model's vectors are, whatever made them: similarity against gold scores,
retrieval, and how two models' vectors of the same texts agree.

An ``embed`` callable takes a list of texts and returns their vectors, ``(n, dim)``, in input order
(batching and sorting by length are its own business). It is called once per list of texts: each
distinct text of a pairs set, then a retrieval set's queries and its corpus. Vectors are compared by
the model's own similarity function, cosine unless its :class:`~tinyplm.evaluate.similarity.Scoring`
says otherwise (:mod:`tinyplm.evaluate.similarity`: cosine of L2-normalised rows, dot product,
negative euclidean or manhattan distance, as sentence-transformers' evaluators compare them).

- :func:`similarity_scores`: Spearman and Pearson correlation (x 100) of the similarity of each
  pair's vectors with its gold score, as STS-B and MTEB's STS tasks report them.
- :func:`retrieval_scores`: nDCG@k, MRR@k, recall@1 and recall@k (x 100, averaged over queries) of
  ranking the whole corpus by similarity, as BEIR computes them with pytrec_eval: linear gain (the
  graded relevance), ``log2(rank + 1)`` discount, the ideal ranking from the query's own qrels,
  relevant meaning relevance above 0. Ties in a ranking go to the earlier document of the corpus.
  The queries and documents get the scoring's prompts first (ST's ``encode_query``/``encode_document``).
- :func:`embedding_agreement`: the mean cosine of paired rows of two models' vectors.
- :func:`set_metrics`: the metrics of a set from vectors already computed for its distinct texts
  (an eval split of the embedding head, :func:`tinyplm.tasks.retrieval.embedding_split`).

The ranking and the metrics are written here rather than taken from ``pytrec_eval`` or ``beir``
(neither is a dependency, and both would need the full score matrix); the tests check nDCG
against scikit-learn's ``ndcg_score``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tinyplm.errors import TinyplmError
from tinyplm.evaluate.metrics import pearson, spearman
from tinyplm.evaluate.similarity import Scoring, Similarity, matrix, pairwise, prepared
from tinyplm.tasks.retrieval import RetrievalSet, ScoredPairs, set_texts

#: Texts -> their vectors, ``(len(texts), dim)``, in input order.
Embed = Callable[[Sequence[str]], np.ndarray]


@dataclass(frozen=True)
class SimilarityScores:
    """Spearman and Pearson correlation (x 100) of the pairs' similarities with the gold scores, over
    ``pairs`` pairs; 0.0 where undefined (constant similarities)."""

    spearman: float
    pearson: float
    pairs: int


@dataclass(frozen=True)
class RetrievalScores:
    """Retrieval metrics x 100, each the mean over ``queries`` queries ranking ``documents``
    documents; the ``_at_10`` fields hold the cutoff ``k`` (10 unless asked otherwise)."""

    ndcg_at_10: float
    mrr_at_10: float
    recall_at_1: float
    recall_at_10: float
    queries: int
    documents: int
    k: int = 10


def unit_vectors(embed: Embed, texts: Sequence[str]) -> np.ndarray:
    """``embed(texts)`` as float64 rows of length 1 (a zero row stays zero)  # (n, dim)

    Raises ``TinyplmError`` when ``embed`` returns anything but one finite row per text."""
    return compared_vectors(embed, texts, Similarity.COSINE)


def compared_vectors(embed: Embed, texts: Sequence[str], similarity: Similarity) -> np.ndarray:
    """``embed(texts)`` as float64 rows ready for ``similarity`` (unit rows for cosine)  # (n, dim)

    Raises ``TinyplmError`` when ``embed`` returns anything but one finite row per text."""
    vectors = np.asarray(embed(list(texts)))
    if vectors.ndim != 2 or vectors.shape[0] != len(texts) or not np.issubdtype(vectors.dtype, np.number):
        raise TinyplmError(f"embed returned {vectors.dtype} of shape {vectors.shape} for {len(texts)} texts; "
                           f"expected numbers of shape ({len(texts)}, dim)")
    return prepared(vectors, similarity, "embed's vectors")


def _normalised(vectors: np.ndarray, what: str) -> np.ndarray:
    """``vectors`` as float64 rows of length 1 (zero rows stay zero); raises ``TinyplmError`` for
    a value that is not finite."""
    return prepared(vectors, Similarity.COSINE, what)


def similarity_scores(embed: Embed, pairs: ScoredPairs, scoring: Scoring = Scoring()) -> SimilarityScores:
    """Spearman and Pearson (x 100) of the similarity of each pair's vectors (``scoring.similarity``)
    against its gold score. Each distinct text is embedded once. Raises ``TinyplmError`` for a bad
    ``embed``."""
    texts = list(dict.fromkeys(pairs.texts_a + pairs.texts_b))
    index = {text: i for i, text in enumerate(texts)}
    vectors = compared_vectors(embed, texts, scoring.similarity)  # (texts, dim)
    a = vectors[[index[text] for text in pairs.texts_a]]  # (pairs, dim)
    b = vectors[[index[text] for text in pairs.texts_b]]
    scores = pairwise(a, b, scoring.similarity)  # (pairs,)
    gold = np.asarray(pairs.scores, dtype=np.float64)
    return SimilarityScores(100 * spearman(scores, gold), 100 * pearson(scores, gold), len(gold))


def top_k(queries: np.ndarray, documents: np.ndarray, k: int,
          similarity: Similarity = Similarity.COSINE) -> np.ndarray:
    """The indices of the ``k`` documents most similar to each query, best first, ties going to the
    lower index  # (queries, k)

    ``queries`` # (q, dim) and ``documents`` # (n, dim) are rows prepared for ``similarity`` (unit
    rows for cosine: :func:`~tinyplm.evaluate.similarity.prepared`); ``k`` <= n. The similarities are
    taken in float64 and rounded to float32, so that two equal documents tie exactly (float32 sums in
    another order could tell them apart) and the result does not depend on how queries are chunked."""
    scores = matrix(queries, documents, similarity).astype(np.float32)  # (q, n)
    n = scores.shape[1]
    if k >= n:
        return np.argsort(-scores, axis=1, kind="stable")[:, :k]
    best = np.argpartition(-scores, k - 1, axis=1)[:, :k]  # the k best in no order; a tie at k-th place: any
    kth = np.take_along_axis(scores, best, axis=1).min(axis=1)  # (q,)
    for row in np.flatnonzero((scores >= kth[:, None]).sum(axis=1) > k):  # the k-th score is shared
        best[row] = np.argsort(-scores[row], kind="stable")[:k]
    order = np.lexsort((best, -np.take_along_axis(scores, best, axis=1)), axis=1)  # score down, then index
    return np.take_along_axis(best, order, axis=1)


def query_metrics(ranked: Sequence[int], judged: dict[int, int], k: int) -> np.ndarray:
    """nDCG@k, MRR@k, recall@1 and recall@k (fractions) of one query's ``ranked`` document indices
    (best first) given its ``judged`` relevance per document index (above 0: relevant)  # (4,)"""
    gains = [judged.get(int(doc), 0) for doc in ranked[:k]]
    relevant = sorted((rel for rel in judged.values() if rel > 0), reverse=True)
    if not relevant:
        return np.zeros(4)
    dcg = sum(gain / math.log2(rank + 2) for rank, gain in enumerate(gains) if gain > 0)
    ideal = sum(gain / math.log2(rank + 2) for rank, gain in enumerate(relevant[:k]))
    first = next((rank for rank, gain in enumerate(gains) if gain > 0), None)
    found = sum(gain > 0 for gain in gains)
    hit_at_1 = bool(gains) and gains[0] > 0
    return np.array([dcg / ideal, 0.0 if first is None else 1 / (first + 1), hit_at_1 / len(relevant),
                     found / len(relevant)])


def retrieval_scores(embed: Embed, rset: RetrievalSet, k: int = 10, chunk: int = 1024,
                     scoring: Scoring = Scoring()) -> RetrievalScores:
    """Each query of ``rset`` ranks the whole corpus by ``scoring.similarity``; -> the mean of
    :func:`query_metrics` over the queries, x 100. The queries (each after ``scoring.query_prompt``)
    and the corpus (after ``scoring.document_prompt``) are embedded once each; the ranking is done
    ``chunk`` queries at a time (memory: ``chunk`` x documents scores). Raises ``TinyplmError`` for
    ``k`` or ``chunk`` below 1, or a bad ``embed`` (rows of another width for queries than for
    documents included)."""
    if k < 1 or chunk < 1:
        raise TinyplmError(f"k and chunk must be 1 or more, got k={k}, chunk={chunk}")
    query_ids, doc_ids = list(rset.queries), list(rset.corpus)
    similarity = scoring.similarity
    queries = compared_vectors(embed, [scoring.query_prompt + q for q in rset.queries.values()], similarity)
    documents = compared_vectors(embed, [scoring.document_prompt + d for d in rset.corpus.values()], similarity)
    if queries.shape[1] != documents.shape[1]:
        raise TinyplmError(f"embed returned {queries.shape[1]}-dim vectors for the queries and "
                           f"{documents.shape[1]}-dim ones for the documents; expected one width")
    position = {doc: i for i, doc in enumerate(doc_ids)}
    totals = np.zeros(4)
    for start in range(0, len(query_ids), chunk):
        ranked = top_k(queries[start:start + chunk], documents, min(k, len(doc_ids)), similarity)  # (chunk, k)
        for row, query in zip(ranked, query_ids[start:start + chunk], strict=True):
            judged = {position[doc]: rel for doc, rel in rset.qrels[query].items()}
            totals += query_metrics(row, judged, k)
    ndcg, mrr, recall_1, recall_k = (100 * totals / len(query_ids)).tolist()
    return RetrievalScores(ndcg, mrr, recall_1, recall_k, len(query_ids), len(doc_ids), k)


def embedding_agreement(a: np.ndarray, b: np.ndarray) -> float:
    """The mean cosine of row i of ``a`` with row i of ``b``: two models' vectors of the same texts
    (a compressed child's and its parent's), in [-1, 1]. ``a``, ``b``: # (n, dim), n >= 1.
    Raises ``TinyplmError`` for arrays of other shapes or values that are not finite."""
    a, b = np.asarray(a), np.asarray(b)
    numbers = np.issubdtype(a.dtype, np.number) and np.issubdtype(b.dtype, np.number)
    if a.ndim != 2 or a.shape != b.shape or a.shape[0] == 0 or not numbers:
        raise TinyplmError(f"embedding_agreement compares paired rows: expected two arrays of one shape "
                           f"(n, dim) of numbers with n >= 1, got {a.dtype} {a.shape} and {b.dtype} {b.shape}")
    cosines = np.einsum("ij,ij->i", _normalised(a, "the first vectors"), _normalised(b, "the second vectors"))
    return float(cosines.mean())


def set_metrics(data: ScoredPairs | RetrievalSet, texts: Sequence[str], vectors: np.ndarray,
                similarity: Similarity = Similarity.COSINE) -> dict[str, float]:
    """The metrics (x 100) of a pairs set (``spearman``, ``pearson``) or a retrieval set
    (``ndcg_at_10``, ``mrr_at_10``, ``recall_at_1``, ``recall_at_10``) from ``vectors`` # (len(texts), dim),
    row i the vector of ``texts[i]``, compared by ``similarity``. Raises ``TinyplmError`` when
    ``texts`` are not every text of the set (:func:`~tinyplm.tasks.retrieval.set_texts`: an eval
    split cut short, e.g. by ``task.max_eval_examples``) or the rows do not match them."""
    texts = list(texts)
    if texts != set_texts(data):
        raise TinyplmError(f"{data.source}: the vectors given are of {len(texts)} texts, not of the set's "
                           f"{len(set_texts(data))} distinct texts; an embedding eval set is scored whole "
                           "(leave task.max_eval_examples unset)")
    vectors = np.asarray(vectors)
    if vectors.ndim != 2 or vectors.shape[0] != len(texts):
        raise TinyplmError(f"{data.source}: vectors of shape {vectors.shape} for {len(texts)} texts; "
                           f"expected ({len(texts)}, dim)")
    row = {text: i for i, text in enumerate(texts)}

    def lookup(asked: Sequence[str]) -> np.ndarray:
        return vectors[[row[text] for text in asked]]

    if isinstance(data, ScoredPairs):
        sim = similarity_scores(lookup, data, Scoring(similarity))
        return {"spearman": sim.spearman, "pearson": sim.pearson}
    ret = retrieval_scores(lookup, data, scoring=Scoring(similarity))
    return {"ndcg_at_10": ret.ndcg_at_10, "mrr_at_10": ret.mrr_at_10, "recall_at_1": ret.recall_at_1,
            "recall_at_10": ret.recall_at_10}
