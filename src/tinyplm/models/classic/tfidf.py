"""The TF-IDF + logistic-regression floor: fitted by scikit-learn, run as a small torch module.

:func:`fit_tfidf` fits scikit-learn's ``TfidfVectorizer`` (l2-normalised, smoothed idf) and
``LogisticRegression`` on the n-grams of :class:`~tinyplm.models.classic.words.WordTokenizer` (our
analyzer, so the model and its tokenizer agree by construction), then copies the fitted numbers
(idf, coefficients, intercept) into :class:`TfidfClassifier`. That module computes exactly what
scikit-learn's ``decision_function`` does, from the n-gram ids of each sentence:

``logits = W^T x / ||x|| + b`` with ``x_k = count_k * idf_k``

(``W x`` is a sum over the sentence's n-gram occurrences; ``||x||`` sums each id's occurrences
first, :func:`tfidf_norm`).
So the model is saved like every other (safetensors + config.json + the vocabulary in JSON, never a
pickle), measured by the same speed code, and exported to ONNX. A binary logistic regression's one
score ``d`` becomes the logits ``(-d/2, d/2)``: the same argmax, and softmax gives sigmoid(d).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput

from tinyplm.models.classic.config import FamilyConfig
from tinyplm.models.classic.lstm import FamilyModule
from tinyplm.models.classic.words import SPECIALS, WordTokenizer

#: n-gram ids kept per text: every n-gram of a long sentence, as scikit-learn saw when fitting.
MAX_NGRAMS = 4096


class TfidfClassifier(FamilyModule):
    """TF-IDF features and a linear classifier (see the module docstring).

    ``forward(input_ids (batch, seq), attention_mask (batch, seq))`` -> ``.logits (batch, labels)``.
    Ids 0-2 (the specials and unknown n-grams) have idf 0, so they count for nothing."""

    def __init__(self, config: FamilyConfig) -> None:
        super().__init__()
        self.config = config
        self.register_buffer("idf", torch.zeros(config.vocab_size))
        self.weight = nn.Parameter(torch.zeros(config.vocab_size, config.num_labels))
        self.bias = nn.Parameter(torch.zeros(config.num_labels))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, **_) -> SequenceClassifierOutput:
        mask = attention_mask if attention_mask is not None else torch.ones_like(input_ids)
        v = self.idf[input_ids] * mask.to(self.idf.dtype)  # (batch, seq): idf of each occurrence
        linear = (v.unsqueeze(-1) * self.weight[input_ids]).sum(1)  # (batch, labels)
        return SequenceClassifierOutput(logits=linear / tfidf_norm(input_ids, v).unsqueeze(-1) + self.bias)


def tfidf_norm(input_ids: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``||x||`` per row, ``x_k`` the sum of ``v`` over the occurrences of id ``k``: the ids are
    sorted, each run of equal ids summed (a segment sum), and the sums squared. Memory and time
    grow with the sentence (``n log n``), not with its square as comparing every pair would (a
    64 x 4,096-n-gram batch took 4 GB that way), nor with the vocabulary; it exports to ONNX
    (TopK, CumSum, ScatterElements)."""
    ids, order = input_ids.sort(dim=1)
    vs = v.gather(1, order)
    first = torch.ones_like(ids[:, :1], dtype=torch.bool)
    starts = torch.cat([first, ids[:, 1:] != ids[:, :-1]], dim=1)  # where a run of equal ids begins
    run = starts.long().cumsum(1) - 1  # (batch, seq): which run each occurrence is in
    sums = torch.zeros_like(vs).scatter_add(1, run, vs)  # (batch, seq): x_k of each run, zeros after
    return sums.pow(2).sum(1).clamp(min=1e-24).sqrt()


def documents(tok: WordTokenizer, texts: Sequence[str], pairs: Sequence[str | None] | None = None) -> list[list[str]]:
    """The n-grams of each text (and its pair), as the tokenizer finds them."""
    pairs = pairs or [None] * len(texts)
    return [tok.tokens(t) + (tok.tokens(p) if p else []) for t, p in zip(texts, pairs, strict=True)]


def fit_tfidf(texts: Sequence[str], labels: Sequence[int], num_labels: int, *,
              pairs: Sequence[str | None] | None = None, ngram_max: int = 2, min_df: int = 1,
              max_features: int | None = None, c: float = 1.0,
              max_iter: int = 1000, balanced: bool = False, seed: int = 0,
              id2label: dict[int, str] | None = None) -> tuple[TfidfClassifier, WordTokenizer, dict]:
    """Fit TF-IDF + logistic regression with scikit-learn -> (model, tokenizer, fit info).

    ``balanced`` weighs the classes by n / (classes x n_c) (scikit-learn's ``class_weight``).
    Raises ``ValueError`` when the training labels hold fewer than two classes."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    if len(set(labels)) < 2:
        raise ValueError("TF-IDF + logistic regression needs training examples of at least two classes")
    base = WordTokenizer(list(SPECIALS), ngram_max=ngram_max, max_tokens=MAX_NGRAMS)
    vectorizer = TfidfVectorizer(analyzer=lambda doc: doc, min_df=min_df, max_features=max_features)
    x = vectorizer.fit_transform(documents(base, texts, pairs))
    lr = LogisticRegression(C=c, max_iter=max_iter, class_weight="balanced" if balanced else None, random_state=seed)
    lr.fit(x, np.asarray(labels))
    by_column = sorted(vectorizer.vocabulary_, key=vectorizer.vocabulary_.get)
    tok = WordTokenizer([*SPECIALS, *by_column], ngram_max=ngram_max, max_tokens=MAX_NGRAMS)
    config = FamilyConfig(arch="tfidf_lr", vocab_size=len(tok), embed_dim=0, hidden=0, layers=0,
                          num_labels=num_labels, id2label=id2label, ngram_max=ngram_max)
    model = TfidfClassifier(config)
    model.record_params()
    coef, intercept = lr.coef_.astype(np.float32), lr.intercept_.astype(np.float32)
    if coef.shape[0] == 1:  # binary: one score d -> logits (-d/2, d/2)
        coef, intercept = np.concatenate([-coef / 2, coef / 2]), np.concatenate([-intercept / 2, intercept / 2])
    with torch.no_grad():
        model.idf[len(SPECIALS):] = torch.from_numpy(vectorizer.idf_.astype(np.float32))
        model.weight[len(SPECIALS):] = torch.from_numpy(coef.T.copy())
        model.bias.copy_(torch.from_numpy(intercept))
    info = {"features": len(by_column), "iterations": int(np.max(lr.n_iter_)), "class_weight": lr.class_weight}
    return model.eval(), tok, info
