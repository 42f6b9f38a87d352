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


def test_words_are_read_as_running_text_by_a_byte_level_tokenizer() -> None:
    """RoBERTa's tokenizer (byte-level BPE, add_prefix_space off): each word after the first gets the
    pieces running text gives it (``Ġmovie``), not those of a word that follows no space (``movie``)."""
    import json

    from tests.helpers_families import tiny_tokenizer
    from transformers import RobertaTokenizer

    model = json.loads(tiny_tokenizer("bpe").backend_tokenizer.to_str())["model"]
    tok = RobertaTokenizer(vocab=model["vocab"], merges=[tuple(m) for m in model["merges"]])
    words = ["the", "movie", "was", "good"]
    t = encode_tagged([words], [["O", "B-PER", "I-PER", "O"]], tok, LABELS)
    assert t.input_ids[0] == tok(" ".join(words))["input_ids"]
    pieces = tok.convert_ids_to_tokens(t.input_ids[0])
    assert [pieces[p] for p in t.first_pieces[0][1:]] == ["Ġmovie", "Ġwas", "Ġgood"]
    assert [t.piece_labels[0][p] for p in t.first_pieces[0]] == [LABELS[x] for x in ("O", "B-PER", "I-PER", "O")]


def test_a_word_of_no_piece_and_a_lone_word_start_piece(tok) -> None:
    """A word the tokenizer drops (a zero-width space) has no first piece; SentencePiece's lone ``▁``
    before a word is that word's first piece."""
    from tests.helpers_families import tiny_tokenizer

    t = encode_tagged([["the", "\u200b", "movie"]], [["O", "B-PER", "B-LOC"]], tok, LABELS)
    assert t.words_of(0) == [0, 2] and [t.piece_labels[0][p] for p in t.first_pieces[0]] == [0, LABELS["B-LOC"]]
    unigram = tiny_tokenizer("unigram")
    t = encode_tagged([["the", "movie"]], None, unigram, LABELS)
    pieces = unigram.convert_ids_to_tokens(t.input_ids[0])
    assert t.words_of(0) == [0, 1] and pieces[t.first_pieces[0][1]] == "▁"


def test_an_empty_or_blank_word_has_no_piece_whatever_the_tokenizer() -> None:
    """Joined by spaces, an empty word leaves two spaces in a row: a tokenizer that keeps a lone space
    piece (SentencePiece's ``▁``) gave it to the empty word, trained and predicted from a space."""
    from tests.helpers_families import tiny_tokenizer

    unigram = tiny_tokenizer("unigram")
    for words in (["the", "", "movie"], ["the", " ", "movie"]):
        t = encode_tagged([words], [["O", "B-PER", "B-LOC"]], unigram, LABELS)
        assert t.words_of(0) == [0, 2], words
        assert [t.piece_labels[0][p] for p in t.first_pieces[0]] == [LABELS["O"], LABELS["B-LOC"]]
