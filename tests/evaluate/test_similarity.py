"""The similarity functions an embedding model names: each one, pairwise and as a matrix, equals
sentence-transformers' own arithmetic on random vectors; rankings and correlations follow the
function asked for; a name ST does not know is refused where it is written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyplm.errors import ModelError, TinyplmError
from tinyplm.evaluate.embedding import retrieval_scores, similarity_scores, top_k
from tinyplm.evaluate.similarity import Scoring, Similarity, first_prompt, matrix, pairwise, prepared, similarity_of
from tinyplm.tasks.retrieval import RetrievalSet, ScoredPairs

FAST = settings(max_examples=30, deadline=None, database=None)
util = pytest.importorskip("sentence_transformers.util")

#: Each function -> ST's (pairwise, matrix) functions of the same name.
THEIRS = {
    Similarity.COSINE: (util.pairwise_cos_sim, util.cos_sim),
    Similarity.DOT: (util.pairwise_dot_score, util.dot_score),
    Similarity.EUCLIDEAN: (util.pairwise_euclidean_sim, util.euclidean_sim),
    Similarity.MANHATTAN: (util.pairwise_manhattan_sim, util.manhattan_sim),
}


@FAST
@given(seed=st.integers(0, 10_000), rows=st.integers(1, 6), cols=st.integers(1, 7), dim=st.integers(1, 9),
       similarity=st.sampled_from(list(Similarity)), scale=st.floats(0.01, 50.0))
def test_each_function_is_sentence_transformers_arithmetic(seed: int, rows: int, cols: int, dim: int,
                                                           similarity: Similarity, scale: float) -> None:
    import torch

    rng = np.random.default_rng(seed)
    a, b = scale * rng.normal(size=(rows, dim)), rng.normal(size=(rows, dim))
    docs = rng.normal(size=(cols, dim))
    st_pairwise, st_matrix = THEIRS[similarity]
    ours_pairs = pairwise(prepared(a, similarity, "a"), prepared(b, similarity, "b"), similarity)
    ours_matrix = matrix(prepared(a, similarity, "a"), prepared(docs, similarity, "docs"), similarity)
    as_tensor = {"a": torch.tensor(a), "b": torch.tensor(b), "docs": torch.tensor(docs)}
    np.testing.assert_allclose(ours_pairs, st_pairwise(as_tensor["a"], as_tensor["b"]).numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ours_matrix, st_matrix(as_tensor["a"], as_tensor["docs"]).numpy(), rtol=1e-6,
                               atol=1e-6)


def test_a_long_vector_wins_by_dot_product_and_loses_by_cosine() -> None:
    query = np.array([[1.0, 0.0]])
    docs = np.array([[1.0, 0.05], [3.0, 3.0]])  # the first points the query's way, the second is long
    unit = Similarity.COSINE
    assert top_k(prepared(query, unit, "q"), prepared(docs, unit, "d"), 2).tolist() == [[0, 1]]
    assert top_k(query, docs, 2, Similarity.DOT).tolist() == [[1, 0]]
    assert top_k(query, docs, 2, Similarity.EUCLIDEAN).tolist() == [[0, 1]]


def test_pairs_and_retrieval_follow_the_scoring_asked_for() -> None:
    vectors = {"a": np.array([1.0, 0.0]), "b": np.array([2.0, 0.1]), "c": np.array([0.5, 0.4]),
               "d": np.array([5.0, 5.0])}

    def embed(texts):
        return np.stack([vectors[t.removeprefix("q: ").removeprefix("p: ")] for t in texts])

    pairs = ScoredPairs(("a", "a", "a"), ("b", "c", "d"), (3.0, 2.0, 1.0), Path("pairs.csv"))
    assert similarity_scores(embed, pairs).spearman == pytest.approx(100.0)  # cosine: b, c, d in order
    assert similarity_scores(embed, pairs, Scoring(Similarity.DOT)).spearman == pytest.approx(-50.0)  # d, b, c
    seen: list[list[str]] = []

    def recording(texts):
        seen.append(list(texts))
        return embed(texts)

    rset = RetrievalSet({"q1": "a"}, {"d1": "b", "d2": "d"}, {"q1": {"d1": 1}}, Path("set"))
    assert retrieval_scores(embed, rset, scoring=Scoring(Similarity.COSINE)).recall_at_1 == 100.0
    assert retrieval_scores(recording, rset, scoring=Scoring(Similarity.DOT, "q: ", "p: ")).recall_at_1 == 0.0
    assert seen == [["q: a"], ["p: b", "p: d"]]


def test_names_st_does_not_know_are_refused_where_written() -> None:
    assert similarity_of(None, "x") is Similarity.COSINE
    assert similarity_of("DOT", "x") is Similarity.DOT
    with pytest.raises(TinyplmError, match=r"--similarity: unknown similarity 'dot_product'.*cosine, dot"):
        similarity_of("dot_product", "--similarity")


def test_first_prompt_takes_the_names_in_order() -> None:
    assert first_prompt({"corpus": "c: ", "passage": "p: "}, ("document", "passage", "corpus")) == "p: "
    assert first_prompt({"document": "", "corpus": "c: "}, ("document", "passage", "corpus")) == "c: "
    assert first_prompt({}, ("query",)) == ""


def test_a_layout_with_an_unknown_similarity_is_refused_naming_the_file(tmp_path: Path) -> None:
    from helpers_embedding import make_sentence_dir
    from tinyplm.models.pooling import MODEL_SETTINGS_FILE, layout_similarity

    model = make_sentence_dir(tmp_path / "model")
    assert layout_similarity(model) is None  # cosine, ST's default
    settings_file = model / MODEL_SETTINGS_FILE
    config = json.loads(settings_file.read_text(encoding="utf-8"))
    settings_file.write_text(json.dumps({**config, "similarity_fn_name": "dot"}), encoding="utf-8")
    assert layout_similarity(model) == "dot"
    settings_file.write_text(json.dumps({**config, "similarity_fn_name": "jaccard"}), encoding="utf-8")
    with pytest.raises(ModelError, match=r"config_sentence_transformers.json: similarity_fn_name: 'jaccard'"):
        layout_similarity(model)
