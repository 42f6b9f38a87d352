"""How two sentence vectors are compared, and what an embedding model's texts are prefixed with.

A sentence-transformers model names its similarity function (``similarity_fn_name`` in
``config_sentence_transformers.json``: ``cosine``, the default, ``dot``, ``euclidean`` or
``manhattan``) and may name prompts: ``query`` for search queries, ``document`` (or ``passage``,
``corpus``) for what they search (e5's ``"query: "``/``"passage: "``). ST's own evaluators score a
model by its function and feed its retrieval queries and documents with those prompts
(``encode_query``/``encode_document``), so a model trained for dot products is judged on dot
products, not on the cosines of vectors it never normalised. :class:`Scoring` carries both;
:data:`MEASURES` holds each function as data: how rows are prepared once (unit rows for cosine),
then compared pairwise or as a query x document matrix, on the same arithmetic as ST's
``sentence_transformers.util`` (distances taken negative, so higher is always more similar).

The distance matrices come from ``scipy.spatial.distance.cdist`` (scipy is already installed with
scikit-learn); the rest is numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tinyplm.errors import TinyplmError
from tinyplm.models.pooling import Similarity

__all__ = ["DOCUMENT_PROMPTS", "MEASURES", "QUERY_PROMPTS", "Scoring", "Similarity", "first_prompt", "matrix",
           "pairwise", "prepared", "similarity_of"]

#: The prompt names ST's ``encode_query`` uses, then ``encode_document`` (the first it finds), in order.
#: The first that is not empty is taken: ST 6 fills an empty ``document`` prompt in for a model that
#: saves none, which its ``encode_document`` then prefers to a saved ``passage`` one (e5's), against
#: what its documentation says and what the model means.
QUERY_PROMPTS = ("query",)
DOCUMENT_PROMPTS = ("document", "passage", "corpus")


def similarity_of(name: str | None, where: str) -> Similarity:
    """ST's ``similarity_fn_name`` -> its :class:`Similarity` (None: cosine, ST's default). Raises
    ``TinyplmError`` naming ``where`` (a file and key, or an option) for a name ST does not know."""
    if name is None:
        return Similarity.COSINE
    try:
        return Similarity(str(name).lower())
    except ValueError:
        raise TinyplmError(f"{where}: unknown similarity {name!r}; expected one of "
                           f"{', '.join(s.value for s in Similarity)}") from None


@dataclass(frozen=True)
class Scoring:
    """How a model's vectors are compared (``similarity``) and the texts prepended to its retrieval
    queries and documents before they are embedded (empty: none). Pairs sets take no prompt, as in
    ST's ``EmbeddingSimilarityEvaluator``."""

    similarity: Similarity = Similarity.COSINE
    query_prompt: str = ""
    document_prompt: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"similarity": self.similarity.value, "query_prompt": self.query_prompt,
                "document_prompt": self.document_prompt}


def first_prompt(prompts: dict[str, str], names: tuple[str, ...]) -> str:
    """The text of the first of ``names`` that ``prompts`` holds ("" when none)."""
    return next((prompts[n] for n in names if prompts.get(n)), "")


@dataclass(frozen=True)
class _Measure:
    """One similarity function: ``prepare`` (rows as they are compared: float64, checked finite),
    ``pairwise`` ((n, dim), (n, dim) -> (n,)) and ``matrix`` ((q, dim), (n, dim) -> (q, n)), both on
    prepared rows."""

    prepare: Callable[[np.ndarray], np.ndarray]
    pairwise: Callable[[np.ndarray, np.ndarray], np.ndarray]
    matrix: Callable[[np.ndarray, np.ndarray], np.ndarray]


def _unit(vectors: np.ndarray) -> np.ndarray:
    """Rows of length 1 (a zero row stays zero: its cosine with anything is 0)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def _as_is(vectors: np.ndarray) -> np.ndarray:
    return vectors


def _dot_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", a, b)


def _distances(metric: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def negative(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        from scipy.spatial.distance import cdist

        return -cdist(a, b, metric=metric)

    return negative


MEASURES: dict[Similarity, _Measure] = {
    Similarity.COSINE: _Measure(_unit, _dot_rows, lambda q, d: q @ d.T),
    Similarity.DOT: _Measure(_as_is, _dot_rows, lambda q, d: q @ d.T),
    Similarity.EUCLIDEAN: _Measure(_as_is, lambda a, b: -np.linalg.norm(a - b, axis=1), _distances("euclidean")),
    Similarity.MANHATTAN: _Measure(_as_is, lambda a, b: -np.abs(a - b).sum(axis=1), _distances("cityblock")),
}


def prepared(vectors: np.ndarray, similarity: Similarity, what: str) -> np.ndarray:
    """``vectors`` ``(n, dim)`` as float64 rows ready for ``similarity`` (unit rows for cosine).
    Raises ``TinyplmError`` naming ``what`` for a value that is not finite."""
    vectors = np.asarray(vectors).astype(np.float64)
    if not np.isfinite(vectors).all():
        raise TinyplmError(f"{what} hold values that are not finite (nan or inf)")
    return MEASURES[similarity].prepare(vectors)


def pairwise(a: np.ndarray, b: np.ndarray, similarity: Similarity) -> np.ndarray:
    """The similarity of row i of ``a`` with row i of ``b`` (rows :func:`prepared`)  # (n,)"""
    return MEASURES[similarity].pairwise(a, b)


def matrix(queries: np.ndarray, documents: np.ndarray, similarity: Similarity) -> np.ndarray:
    """The similarity of every query with every document (rows :func:`prepared`)  # (q, n)"""
    return MEASURES[similarity].matrix(queries, documents)
