"""NER alignment: the word's label on its first piece, IGNORE elsewhere; truncated words become O."""

from __future__ import annotations

import numpy as np
import pytest
from tests.conftest import make_tiny_model_dir

from tinyplm.tasks.conll import TAGS
from tinyplm.tasks.tagging import IGNORE, encode_tagged, tags_from_logits


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(make_tiny_model_dir(tmp_path_factory.mktemp("tok"))))


LABELS = {t: i for i, t in enumerate(TAGS)}


def test_labels_on_first_pieces_only(tok) -> None:
    words = ["the", "xyz", "movie"]  # "xyz" splits into x ##y ##z in the tiny vocabulary
    tags = ["O", "B-PER", "I-PER"]
    t = encode_tagged([words], [tags], tok, LABELS)
    pieces = tok.convert_ids_to_tokens(t.input_ids[0])
    assert pieces == ["[CLS]", "the", "x", "##y", "##z", "movie", "[SEP]"]
    assert t.piece_labels[0] == [IGNORE, LABELS["O"], LABELS["B-PER"], IGNORE, IGNORE, LABELS["I-PER"], IGNORE]
    assert t.first_pieces[0] == [1, 2, 5]


def test_predictions_map_back_to_words_and_truncation_is_o(tok) -> None:
    words = ["the", "xyz", "movie", "plot", "story"]
    t = encode_tagged([words], None, tok, LABELS, max_length=6)  # [CLS] the x ##y ##z [SEP]: 2 words kept
    assert t.first_pieces[0] == [1, 2]
    logits = np.zeros((6, len(TAGS)))
    logits[1, LABELS["B-LOC"]] = 1
    logits[2, LABELS["B-PER"]] = 1
    logits[3, LABELS["B-ORG"]] = 5  # a continuation piece: never read
    assert tags_from_logits(t, [logits], TAGS, [5]) == [["B-LOC", "B-PER", "O", "O", "O"]]


def test_tag_count_must_match(tok) -> None:
    with pytest.raises(ValueError, match="sentence 0: 2 words but 1 tags"):
        encode_tagged([["the", "movie"]], [["O"]], tok, LABELS)
