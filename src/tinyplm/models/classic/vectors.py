"""Static word vectors trained on a corpus: word2vec (gensim) and GloVe (our own, see below),
and the embedding table of a word vocabulary built from them.

GloVe (Pennington et al. 2014) minimises, over the non-zero co-occurrence counts ``X_ij``,

``J = sum_ij f(X_ij) (w_i . v_j + b_i + c_j - log X_ij)^2``,  ``f(x) = min(1, (x / x_max)^alpha)``

with counts weighted ``1/distance`` inside a symmetric window; the vectors are ``w + v``.
We do not use a GloVe package, deliberately: ``glove-python-binary`` has no build for this Python
(pip finds no distribution), ``glove-python`` is a 2016 Cython source release, and ``mittens``
(last release 2019) works on a dense vocabulary x vocabulary matrix (30,000 words: 7 GB in
float64). Counting is numpy (one pass per window offset), the loss is :func:`glove_loss` (a pure
function, tested against a hand computation) and training is torch AdaGrad over shuffled
mini-batches of the non-zero entries, as the reference C code does.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from tinyplm.models.classic.words import PAD_ID, words


@dataclass(frozen=True)
class WordVectors:
    """Trained vectors: ``words[i]`` has the row ``vectors[i]`` ``(len(words), dim)``."""

    words: list[str]
    vectors: np.ndarray

    def table_for(self, vocab: Sequence[str], seed: int = 0) -> tuple[torch.Tensor, float]:
        """An embedding table for ``vocab`` (ids in order): the trained vector of each word found,
        a small random one (the vectors' own scale) for the rest, zeros for the padding id ->
        (table ``(len(vocab), dim)``, share of vocabulary words found)."""
        index = {w: i for i, w in enumerate(self.words)}
        rng = np.random.default_rng(seed)
        scale = float(self.vectors.std()) or 0.1
        table = rng.normal(0.0, scale, (len(vocab), self.vectors.shape[1])).astype(np.float32)
        found = [(i, index[w]) for i, w in enumerate(vocab) if w in index]
        if found:
            rows, src = zip(*found, strict=True)
            table[list(rows)] = self.vectors[list(src)]
        table[PAD_ID] = 0.0
        return torch.from_numpy(table), len(found) / max(1, len(vocab) - 3)


def tokenised(texts: Sequence[str]) -> list[list[str]]:
    """The corpus as lists of lower-cased words (the students' own tokenisation)."""
    return [words(t) for t in texts]


def train_word2vec(texts: Sequence[str], dim: int, window: int = 5, min_count: int = 3, epochs: int = 5,
                   seed: int = 0) -> WordVectors:
    """Skip-gram word2vec (gensim, one worker: reproducible for a seed) on ``texts``."""
    from gensim.models import Word2Vec

    model = Word2Vec(sentences=tokenised(texts), vector_size=dim, window=window, min_count=min_count, sg=1,
                     epochs=epochs, seed=seed, workers=1)
    return WordVectors(list(model.wv.index_to_key), model.wv.vectors.astype(np.float32))


def cooccurrence(docs: Sequence[Sequence[str]], vocab_size: int, window: int,
                 min_count: int = 1) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Symmetric co-occurrence counts of the ``vocab_size`` most frequent words (seen at least
    ``min_count`` times), each pair at distance d adding 1/d -> (words, rows i, cols j, counts X_ij)
    over the non-zero entries. Documents do not see across each other."""
    counts = Counter(w for d in docs for w in d)
    kept = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))[:vocab_size]
    index = {w: i for i, w in enumerate(kept)}
    gap = [-1] * window  # out-of-vocabulary words and document breaks hold a place but count for nothing
    ids = np.asarray([x for d in docs for x in [index.get(w, -1) for w in d] + gap], dtype=np.int64)
    n = len(kept)
    keys, weights = [], []
    for dist in range(1, window + 1):
        a, b = ids[:-dist], ids[dist:]
        ok = (a >= 0) & (b >= 0)
        a, b = a[ok], b[ok]
        keys += [a * n + b, b * n + a]
        weights += [np.full(2 * len(a), 1.0 / dist)]
    if not keys:
        return kept, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
    unique, inverse = np.unique(np.concatenate(keys), return_inverse=True)
    x = np.bincount(inverse, weights=np.concatenate(weights)).astype(np.float32)
    return kept, unique // n, unique % n, x


def glove_weight(x: torch.Tensor, x_max: float = 100.0, alpha: float = 0.75) -> torch.Tensor:
    """GloVe's weighting ``f(x) = min(1, (x / x_max)^alpha)``."""
    return torch.clamp(x / x_max, max=1.0) ** alpha


def glove_loss(w: torch.Tensor, v: torch.Tensor, b: torch.Tensor, c: torch.Tensor, i: torch.Tensor, j: torch.Tensor,
               x: torch.Tensor, x_max: float = 100.0, alpha: float = 0.75) -> torch.Tensor:
    """GloVe's weighted least squares summed over entries ``(i[k], j[k], x[k])``: word vectors
    ``w``, context vectors ``v`` ``(words, dim)``, biases ``b``, ``c`` ``(words, 1)``. Rows are
    gathered with sparse gradients (only the rows a batch touches are updated)."""
    emb = torch.nn.functional.embedding
    wi, vj = emb(i, w, sparse=True), emb(j, v, sparse=True)  # (entries, dim)
    bi, cj = emb(i, b, sparse=True)[:, 0], emb(j, c, sparse=True)[:, 0]  # (entries,)
    diff = (wi * vj).sum(-1) + bi + cj - torch.log(x)
    return (glove_weight(x, x_max, alpha) * diff * diff).sum()


def train_glove(texts: Sequence[str], dim: int, window: int = 10, vocab_size: int = 30000, min_count: int = 3,
                epochs: int = 25, lr: float = 0.05, batch_size: int = 16384, seed: int = 0) -> WordVectors:
    """GloVe vectors (``w + v``) for the most frequent words of ``texts`` (see the module docstring)."""
    kept, i, j, x = cooccurrence(tokenised(texts), vocab_size, window, min_count)
    return WordVectors(kept, fit_glove(len(kept), i, j, x, dim, epochs, lr, batch_size, seed)[0])


def fit_glove(n: int, i: np.ndarray, j: np.ndarray, x: np.ndarray, dim: int, epochs: int = 25, lr: float = 0.05,
              batch_size: int = 16384, seed: int = 0) -> tuple[np.ndarray, float]:
    """Minimise :func:`glove_loss` over the entries with AdaGrad -> (``w + v`` ``(n, dim)``, the
    loss over all entries at the end)."""
    gen = torch.Generator().manual_seed(seed)
    init = lambda *shape: ((torch.rand(*shape, generator=gen) - 0.5) / dim).requires_grad_()  # noqa: E731
    w, v, b, c = init(n, dim), init(n, dim), init(n, 1), init(n, 1)  # Adagrad takes sparse gradients
    opt = torch.optim.Adagrad([w, v, b, c], lr=lr)
    ti, tj, tx = torch.from_numpy(i), torch.from_numpy(j), torch.from_numpy(x)
    with warnings.catch_warnings():  # torch notes once that it skips sparse invariant checks
        warnings.filterwarnings("ignore", message="Sparse invariant checks")
        for _ in range(epochs):
            order = torch.randperm(len(tx), generator=gen)
            for k in range(0, len(tx), batch_size):
                sel = order[k:k + batch_size]
                opt.zero_grad()
                glove_loss(w, v, b, c, ti[sel], tj[sel], tx[sel]).backward()
                opt.step()
    with torch.no_grad():
        final = float(glove_loss(w, v, b, c, ti, tj, tx)) if len(tx) else 0.0
    return (w + v).detach().numpy().astype(np.float32), final
