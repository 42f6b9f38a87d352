"""piece_ids gives the transformers tokenizer's ids, by the backend call or the wrapper, for any texts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import make_tiny_model_dir
from tinyplm.models.classic.piece_ids import piece_ids


@settings(max_examples=40, deadline=None)
@given(texts=st.lists(st.text(max_size=80), max_size=6), limit=st.one_of(st.none(), st.integers(1, 12)))
def test_the_same_ids_as_the_tokenizer_gives(tmp_path_factory, texts: list[str], limit: int | None) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(make_tiny_model_dir(tmp_path_factory.mktemp("m")))
    if not texts:
        assert piece_ids(tok, texts, limit) == []
        return
    expected = tok(texts, add_special_tokens=False, truncation=limit is not None, max_length=limit)["input_ids"]
    assert piece_ids(tok, texts, limit) == expected
