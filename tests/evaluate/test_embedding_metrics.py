"""Similarity and retrieval metrics of an embedding model, on vectors made in the test: perfect
retrieval scores 100, every metric stays in [0, 100], nDCG@10 equals scikit-learn's, chunking and
ties change nothing, a monotone similarity has Spearman 100."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import ndcg_score

from tinyplm.errors import TinyplmError
from tinyplm.evaluate.embedding import (
    RetrievalScores,
    embedding_agreement,
    query_metrics,
    retrieval_scores,
    similarity_scores,
    top_k,
)
from tinyplm.tasks.retrieval import RetrievalSet, ScoredPairs

FAST = settings(max_examples=40, deadline=None, database=None)


class TableEmbed:
    """An ``embed`` that looks each text up in ``vectors`` and records every list it is given."""

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors, self.calls = vectors, []

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.stack([self.vectors[text] for text in texts]).astype(np.float32)


def case(seed: int, queries: int, documents: int, dim: int = 8, graded: bool = True,
         duplicates: bool = False) -> tuple[RetrievalSet, TableEmbed, np.ndarray, np.ndarray]:
    """A random retrieval set (every query with a relevant document), its embed, and the
    relevance # (queries, documents) and unit query-document cosines # (queries, documents)."""
    rng = np.random.default_rng(seed)
    docs = rng.normal(size=(documents, dim))
    if duplicates and documents > 1:  # some documents repeat an earlier one: exact ties
        repeat = rng.random(documents) < 0.3
        docs[repeat] = docs[rng.integers(0, documents, size=documents)[repeat] // 2]
    qs = rng.normal(size=(queries, dim))
    rel = rng.integers(0, 4 if graded else 2, size=(queries, documents)) * (rng.random((queries, documents)) < 0.3)
    rel[np.arange(queries), rng.integers(0, documents, size=queries)] = rng.integers(1, 4 if graded else 2,
                                                                                     size=queries)
    qrels = {f"q{i}": {f"d{j}": int(rel[i, j]) for j in range(documents) if rel[i, j] > 0 or rng.random() < 0.1}
             for i in range(queries)}
    rset = RetrievalSet({f"q{i}": f"query {i}" for i in range(queries)},
                        {f"d{j}": f"doc {j}" for j in range(documents)}, qrels, Path("memory"))
    vectors = {f"query {i}": qs[i] for i in range(queries)} | {f"doc {j}": docs[j] for j in range(documents)}
    unit = lambda m: m / np.linalg.norm(m, axis=1, keepdims=True)  # noqa: E731
    return rset, TableEmbed(vectors), rel, unit(qs) @ unit(docs).T


def values(scores: RetrievalScores) -> list[float]:
    return [scores.ndcg_at_10, scores.mrr_at_10, scores.recall_at_1, scores.recall_at_10]


# --------------------------------------------------------------------------- retrieval


@FAST
@given(st.integers(0, 2**32 - 1), st.integers(1, 20), st.integers(1, 40), st.integers(1, 12))
def test_an_embed_that_maps_each_query_to_its_document_scores_100(seed: int, queries: int, documents: int,
                                                                  k: int) -> None:
    rng = np.random.default_rng(seed)
    docs = rng.normal(size=(documents, 16))
    own = rng.integers(0, documents, size=queries)
    rset = RetrievalSet({f"q{i}": f"query {i}" for i in range(queries)},
                        {f"d{j}": f"doc {j}" for j in range(documents)},
                        {f"q{i}": {f"d{own[i]}": 1} for i in range(queries)}, Path("memory"))
    vectors = {f"doc {j}": docs[j] for j in range(documents)}
    vectors |= {f"query {i}": docs[own[i]] * rng.uniform(0.1, 10) for i in range(queries)}  # scale: normalised away
    embed = TableEmbed(vectors)
    scores = retrieval_scores(embed, rset, k=k)
    assert values(scores) == pytest.approx([100.0] * 4)
    assert (scores.queries, scores.documents, scores.k) == (queries, documents, k)
    assert embed.calls == [list(rset.queries.values()), list(rset.corpus.values())]  # each embedded once


@FAST
@given(st.integers(0, 2**32 - 1), st.integers(1, 15), st.integers(1, 30), st.integers(1, 12), st.booleans())
def test_metrics_stay_within_0_and_100(seed: int, queries: int, documents: int, k: int, duplicates: bool) -> None:
    rset, embed, _, _ = case(seed, queries, documents, duplicates=duplicates)
    scores = retrieval_scores(embed, rset, k=k)
    assert all(0.0 <= value <= 100.0 + 1e-9 for value in values(scores))
    assert scores.recall_at_1 <= scores.recall_at_10 + 1e-9


@FAST
@given(st.integers(0, 2**32 - 1), st.integers(1, 10), st.integers(2, 40))
def test_graded_ndcg_at_10_equals_scikit_learn_when_ranks_have_no_ties(seed: int, queries: int,
                                                                       documents: int) -> None:
    rset, embed, rel, cosines = case(seed, queries, documents)
    gaps = np.diff(np.sort(cosines.astype(np.float32), axis=1), axis=1)
    assume(gaps.size == 0 or gaps.min() > 1e-6)
    reference = np.mean([ndcg_score(rel[i:i + 1], cosines[i:i + 1], k=10) for i in range(queries)])
    assert retrieval_scores(embed, rset).ndcg_at_10 == pytest.approx(100 * reference, abs=1e-9)


@FAST
@given(st.integers(0, 2**32 - 1), st.integers(1, 25), st.integers(1, 30), st.integers(1, 12), st.integers(1, 25))
def test_chunk_size_changes_nothing(seed: int, queries: int, documents: int, k: int, chunk: int) -> None:
    rset, embed, _, _ = case(seed, queries, documents, duplicates=True)
    assert retrieval_scores(embed, rset, k=k, chunk=chunk) == retrieval_scores(embed, rset, k=k, chunk=1024)


@FAST
@given(st.integers(0, 2**32 - 1), st.integers(1, 12), st.integers(1, 30), st.integers(1, 12), st.integers(2, 4))
def test_top_k_is_the_stable_full_sort_even_with_many_ties(seed: int, queries: int, documents: int, k: int,
                                                         dim: int) -> None:
    rng = np.random.default_rng(seed)
    unit = lambda m: m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)  # noqa: E731
    qs = unit(rng.integers(-1, 2, size=(queries, dim)) + 0.0)
    docs = unit(rng.integers(-1, 2, size=(documents, dim)) + 0.0)
    k = min(k, documents)
    full = np.argsort(-(qs @ docs.T).astype(np.float32), axis=1, kind="stable")[:, :k]
    assert np.array_equal(top_k(qs, docs, k), full)


def test_ties_go_to_the_earlier_document() -> None:
    e = np.eye(4)
    vectors = {"d0": e[0], "d1": e[1], "d2": e[1] * 2, "d3": e[2], "q": e[1] + 1e-9 * e[3]}
    corpus = {name: name for name in ("d0", "d1", "d2", "d3")}

    def scored(relevant: str, k: int) -> RetrievalScores:
        rset = RetrievalSet({"q": "q"}, corpus, {"q": {relevant: 1}}, Path("memory"))
        return retrieval_scores(TableEmbed(vectors), rset, k)

    for k in (1, 2, 10):  # d1 and d2 tie: d1 comes first
        later = scored("d2", k)
        assert (later.recall_at_1, later.mrr_at_10) == (0.0, 0.0 if k == 1 else 50.0)
        assert later.ndcg_at_10 == pytest.approx(0.0 if k == 1 else 100 / math.log2(3))
        assert values(scored("d1", k)) == [100.0] * 4


def test_one_query_by_hand() -> None:
    # ranked: doc 3 (not relevant), doc 1 (relevance 2), doc 2 (1); doc 4 (3) is never retrieved
    got = query_metrics([3, 1, 2], {1: 2, 2: 1, 4: 3, 5: 0}, k=10)
    dcg = 2 / math.log2(3) + 1 / math.log2(4)
    ideal = 3 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4)
    assert got.tolist() == pytest.approx([dcg / ideal, 1 / 2, 0.0, 2 / 3])
    assert query_metrics([3, 1, 2], {1: 2, 2: 1, 4: 3}, k=1).tolist() == pytest.approx([0.0, 0.0, 0.0, 0.0])


def test_bad_embed_and_bad_arguments() -> None:
    rset, embed, _, _ = case(0, 3, 5)
    with pytest.raises(TinyplmError, match="k and chunk must be 1 or more"):
        retrieval_scores(embed, rset, k=0)
    with pytest.raises(TinyplmError, match=r"embed returned float32 of shape \(2, 8\) for 3 texts"):
        retrieval_scores(lambda texts: np.zeros((2, 8), np.float32), rset)
    with pytest.raises(TinyplmError, match="not finite"):
        retrieval_scores(lambda texts: np.full((len(texts), 8), np.nan), rset)
    widths = iter([3, 4])
    with pytest.raises(TinyplmError, match="3-dim vectors for the queries and 4-dim ones for the documents"):
        retrieval_scores(lambda texts: np.ones((len(texts), next(widths))), rset)


# --------------------------------------------------------------------------- similarity


@FAST
@given(st.lists(st.integers(0, 100), min_size=2, max_size=30), st.one_of(st.just(1.0), st.floats(0.3, 3.0)),
       st.floats(0.1, 10.0))
def test_spearman_of_a_monotone_transform_of_the_gold_scores_is_100(gold: list[int], power: float,
                                                                    scale: float) -> None:
    assume(len(set(gold)) > 1)
    lo, hi = min(gold), max(gold)
    vectors = {}
    for i, score in enumerate(gold):
        cosine = 2 * ((score - lo) / (hi - lo)) ** power - 1  # increasing in the score
        vectors[f"a{i}"] = np.array([scale, 0.0])
        vectors[f"b{i}"] = np.array([cosine, math.sqrt(max(0.0, 1 - cosine**2))])
    pairs = ScoredPairs(tuple(f"a{i}" for i in range(len(gold))), tuple(f"b{i}" for i in range(len(gold))),
                        tuple(float(s) for s in gold), Path("memory"))
    scores = similarity_scores(TableEmbed(vectors), pairs)
    assert scores.spearman == pytest.approx(100.0) and scores.pairs == len(gold)
    assert -100.0 - 1e-9 <= scores.pearson <= 100.0 + 1e-9
    if power == 1.0:
        assert scores.pearson == pytest.approx(100.0)


def test_similarity_embeds_each_distinct_text_once_and_reverses_sign() -> None:
    vectors = {"x": np.array([1.0, 0.0]), "y": np.array([0.0, 1.0]), "z": np.array([1.0, 1.0])}
    embed = TableEmbed(vectors)
    pairs = ScoredPairs(("x", "x", "y"), ("z", "y", "z"), (3.0, 0.0, 3.5), Path("memory"))
    scores = similarity_scores(embed, pairs)
    assert embed.calls == [["x", "y", "z"]]
    cosines = [1 / math.sqrt(2), 0.0, 1 / math.sqrt(2)]  # x.z, x.y, y.z
    assert scores.spearman == pytest.approx(100 * spearmanr(cosines, pairs.scores).statistic)
    assert scores.pearson == pytest.approx(100 * pearsonr(cosines, pairs.scores).statistic)
    reversed_pairs = ScoredPairs(pairs.texts_a, pairs.texts_b, tuple(-s for s in pairs.scores), Path("memory"))
    assert similarity_scores(embed, reversed_pairs).spearman == pytest.approx(-scores.spearman)


def test_constant_cosines_have_no_correlation() -> None:
    pairs = ScoredPairs(("a", "b"), ("c", "d"), (1.0, 2.0), Path("memory"))
    scores = similarity_scores(lambda texts: np.ones((len(texts), 3)), pairs)
    assert (scores.spearman, scores.pearson) == (0.0, 0.0)


# --------------------------------------------------------------------------- agreement


@FAST
@given(st.integers(0, 2**32 - 1), st.integers(1, 20), st.integers(1, 8))
def test_agreement_is_a_mean_cosine(seed: int, rows: int, dim: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(rows, dim)), rng.normal(size=(rows, dim))
    assert embedding_agreement(a, a * rng.uniform(0.1, 10, size=(rows, 1))) == pytest.approx(1.0)
    assert embedding_agreement(a, -a) == pytest.approx(-1.0)
    value = embedding_agreement(a, b)
    assert -1.0 <= value <= 1.0 and value == pytest.approx(embedding_agreement(b, a))
    by_row = [float(x @ y / np.linalg.norm(x) / np.linalg.norm(y)) for x, y in zip(a, b, strict=True)]
    assert value == pytest.approx(float(np.mean(by_row)))


def test_agreement_refuses_unpaired_rows() -> None:
    with pytest.raises(TinyplmError, match=r"expected two arrays of one shape.*\(3, 2\) and float64 \(2, 2\)"):
        embedding_agreement(np.ones((3, 2)), np.ones((2, 2)))
    with pytest.raises(TinyplmError, match="one shape"):
        embedding_agreement(np.ones(3), np.ones(3))
    assert embedding_agreement(np.zeros((1, 2)), np.ones((1, 2))) == 0.0  # a zero vector agrees with nothing
