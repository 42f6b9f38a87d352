"""Pre-training texts longer than corpus.max_length are read in windows, every piece trained on:
before, each was cut to its first max_length pieces, and the pieces past them were never seen."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import WORDS, make_tiny_model_dir
from tinyplm.models import load_tokenizer
from tinyplm.pretrain.data import encode_texts


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return load_tokenizer(make_tiny_model_dir(tmp_path_factory.mktemp("tok")), 99)


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(1, 40), min_size=1, max_size=6), width=st.integers(4, 16))
def test_windows_hold_every_piece_once_in_order(tokenizer, lengths: list[int], width: int) -> None:
    texts = [" ".join(WORDS[i % len(WORDS)] for i in range(n)) for n in lengths]
    enc = encode_texts(texts, tokenizer, width)
    specials = {tokenizer.cls_token_id, tokenizer.sep_token_id}
    assert all(len(ids) <= width and ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
               for ids in enc.input_ids)
    pieces = [i for ids in enc.input_ids for i in ids if i not in specials]
    whole = [i for t in texts for i in tokenizer(t, add_special_tokens=False)["input_ids"]]
    assert pieces == whole  # nothing dropped, nothing repeated
    assert len(enc.labels) == len(enc.input_ids) == len(enc.word_starts)
    assert len(enc.input_ids) == sum(-(-n // (width - 2)) for n in lengths)  # one-piece words
