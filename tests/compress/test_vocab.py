"""Vocabulary trimming keeps the model's outputs on the data it was trimmed for."""

from __future__ import annotations

from pathlib import Path

import torch

from conftest import make_tiny_model_dir
from tinyplm.compress.vocab import trim_vocab, used_ids
from tinyplm.models import load_classifier, save_model
from tinyplm.models.factorized import factorize_embeddings
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import collate, encode_split, model_inputs

LABELS = ("negative", "positive")


def _data(tmp_path: Path, tok):
    rows = [Example(f"good movie {i}" if i % 2 else f"bad film {i}", None, i % 2, i) for i in range(20)]
    return rows, encode_split(Split("train", rows, tmp_path), tok, 16)


def test_trimming_a_factorized_table_keeps_outputs_and_reloads(tmp_path: Path) -> None:
    model, tok = load_classifier(make_tiny_model_dir(tmp_path / "m"), LABELS, False)
    factorize_embeddings(model, 8)
    rows, enc = _data(tmp_path, tok)
    with torch.no_grad():
        before = model.eval()(**model_inputs(collate(enc, list(range(20))))).logits
    keep = used_ids([enc], tok)
    out = trim_vocab(model, tok, {"train": enc}, [(r.text, None) for r in rows],
                     lambda t: {"train": encode_split(Split("train", rows, tmp_path), t, 16)})
    model, new_tok, new_enc = out.model, out.tokenizer, out.encodings["train"]
    assert len(keep) < model.config.vocab_size == len(new_tok) < 99  # the used pieces and their ##c
    assert model.bert.embeddings.word_embeddings.table.weight.shape == (len(new_tok), 8)
    assert new_enc.input_ids == encode_split(Split("train", rows, tmp_path), new_tok, 16).input_ids
    with torch.no_grad():
        after = model(**model_inputs(collate(new_enc, list(range(20))))).logits
    assert torch.allclose(before, after, atol=1e-6)
    loaded, loaded_tok = load_classifier(save_model(model, new_tok, tmp_path / "t"), LABELS, False)
    with torch.no_grad():
        assert torch.equal(loaded(**model_inputs(collate(new_enc, list(range(20))))).logits, after)
    assert loaded_tok("good movie 3")["input_ids"] == new_tok("good movie 3")["input_ids"]
