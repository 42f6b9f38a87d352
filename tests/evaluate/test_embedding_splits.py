"""Embedding eval splits: a set's distinct texts as an eval split of the embedding head, scored from
the model's vectors through evaluate's one path (encode_evals -> eval_logits -> SPLIT_METRICS) to
the same figures as scoring the set with an embed callable."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from conftest import WORDS
from helpers_families import tiny_tokenizer
from tinyplm.errors import TinyplmError
from tinyplm.evaluate.embedding import retrieval_scores, set_metrics, similarity_scores
from tinyplm.evaluate.model_eval import encode_evals, evaluate_model
from tinyplm.tasks.base import Split, TaskData
from tinyplm.tasks.heads import Head
from tinyplm.tasks.retrieval import SET_OPTION, RetrievalSet, ScoredPairs, embedding_split, set_texts

SOURCE = Path("<test>")


class BagOfPieces(nn.Module):
    """A stand-in embedding model: the mean of fixed random vectors of a text's pieces  # (batch, 8)."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.table = nn.Embedding(vocab, 8)

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        mask = attention_mask.unsqueeze(-1).float()
        return SimpleNamespace(logits=(self.table(input_ids) * mask).sum(1) / mask.sum(1).clamp(min=1))


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8)))


def _pairs(seed: int, n: int = 12) -> ScoredPairs:
    rng = random.Random(seed)
    return ScoredPairs(tuple(_sentence(rng) for _ in range(n)), tuple(_sentence(rng) for _ in range(n)),
                       tuple(rng.uniform(0, 5) for _ in range(n)), SOURCE)


def _retrieval(seed: int, queries: int = 6, docs: int = 15) -> RetrievalSet:
    rng = random.Random(seed)
    corpus = {f"d{i}": _sentence(rng) for i in range(docs)}
    asked = {f"q{i}": _sentence(rng) for i in range(queries)}
    qrels = {f"q{i}": {f"d{rng.randrange(docs)}": rng.randint(1, 2)} for i in range(queries)}
    return RetrievalSet(asked, corpus, qrels, SOURCE)


def _task(evals: dict[str, Split]) -> TaskData:
    train = Split("train", [], SOURCE, Head.EMBEDDING)
    return TaskData("embed", train, evals, (), False, Head.EMBEDDING.row.metrics, "spearman", head=Head.EMBEDDING)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_a_run_scores_a_set_as_embed_eval_does(seed):
    """Both sets through evaluate_model on the stand-in give the figures similarity_scores and
    retrieval_scores give with the same model called as an embed callable."""
    tok = tiny_tokenizer("wordpiece")
    model = BagOfPieces(len(tok)).eval()
    pairs, rset = _pairs(seed), _retrieval(seed)
    data = _task({"sts": embedding_split("sts", pairs), "ret": embedding_split("ret", rset)})
    evals = encode_evals(data, tok, 32)
    got = evaluate_model(model, data, evals)

    def embed(texts):
        enc = tok(list(texts), truncation=True, max_length=32, padding=True, return_tensors="pt")
        with torch.no_grad():
            return model(enc["input_ids"], enc["attention_mask"]).logits.numpy()

    sim, ret = similarity_scores(embed, pairs), retrieval_scores(embed, rset)
    assert got["spearman"] == pytest.approx(sim.spearman, abs=1e-4)
    assert got["pearson"] == pytest.approx(sim.pearson, abs=1e-4)
    assert got["ndcg_at_10"] == pytest.approx(ret.ndcg_at_10, abs=1e-4)
    assert got["mrr_at_10"] == pytest.approx(ret.mrr_at_10, abs=1e-4)
    assert got["recall_at_10"] == pytest.approx(ret.recall_at_10, abs=1e-4)


def test_a_split_holds_every_distinct_text_once_and_its_set():
    pairs = ScoredPairs(("a b", "c", "a b"), ("c", "d", "e"), (1.0, 2.0, 3.0), SOURCE)
    split = embedding_split("sts", pairs)
    assert [ex.text for ex in split.examples] == ["a b", "c", "d", "e"] == set_texts(pairs)
    assert split.head is Head.EMBEDDING and split.options[SET_OPTION] is pairs
    assert all(ex.label is None and ex.text_pair is None for ex in split.examples)


def test_a_set_cut_short_is_refused_naming_max_eval_examples():
    pairs = _pairs(1)
    texts = set_texts(pairs)
    vectors = np.random.default_rng(0).normal(size=(len(texts), 4))
    assert set(set_metrics(pairs, texts, vectors)) == {"spearman", "pearson"}
    with pytest.raises(TinyplmError, match="max_eval_examples"):
        set_metrics(pairs, texts[:-1], vectors[:-1])
    with pytest.raises(TinyplmError, match="expected"):
        set_metrics(pairs, texts, vectors[:-1])
