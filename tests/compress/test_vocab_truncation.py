"""Vocabulary trimming when texts are longer than ``max_length``: the pieces of the windows the
model sees are kept, and the trimmed tokenizer must give those windows again, renumbered.

Hand-made tokenizers of each kind (WordPiece, BPE, Unigram) hold the cases that break a naive
rule: a word the window cuts, whose first pieces change when its later ones are gone, and a pair
whose parts share the window by their whole lengths; shown the texts, trimming keeps what they
need, not shown them, it refuses naming the text and the piece. Trained tokenizers of each kind
(byte-level BPE as RoBERTa's, Unigram as XLM-R's), on toy words and on words over four letters,
meet random texts, pairs and windows in a property test.
"""

from __future__ import annotations

import copy
import functools
import random
import string
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers_families import SPECIALS, _texts, tiny_config, tiny_tokenizer
from tinyplm.compress.vocab import Trimmed, trim_vocab
from tinyplm.errors import ModelError
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import Encoded, collate, encode_split, model_inputs

SOURCE = Path("memory")


def _fast(tok):
    """``tok`` (a ``tokenizers.Tokenizer``) as a transformers fast tokenizer, ``<s> A </s> B </s>``."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1", special_tokens=[("<s>", 0), ("</s>", 2)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", cls_token="<s>",
                                   sep_token="</s>", pad_token="<pad>", unk_token="<unk>", mask_token="<mask>")


def wordpiece(pieces: list[str]):
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(SPECIALS + pieces)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return _fast(tok)


def bpe(pieces: list[str], merges: list[tuple[str, str]]):
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {t: i for i, t in enumerate(SPECIALS + pieces)}
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return _fast(tok)


def unigram(pieces: list[tuple[str, float]]):
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.Unigram([(t, 0.0) for t in SPECIALS] + pieces, unk_id=SPECIALS.index("<unk>")))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    return _fast(tok)


def model_for(tok, seed: int = 0):
    """A tiny random XLM-R classifier (RoBERTa-style positions, moved by trimming) for ``tok``."""
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(seed)
    return AutoModelForSequenceClassification.from_config(tiny_config("xlm-roberta", len(tok))).eval()


def _split(texts: list[tuple[str, str | None]], name: str = "train") -> Split:
    return Split(name, [Example(t, p, i % 2, i) for i, (t, p) in enumerate(texts)], SOURCE)


def encoder(data: dict[str, list[tuple[str, str | None]]], max_length: int):
    """The run's encoding of ``data`` (by split name) at ``max_length``, for a given tokenizer."""
    return lambda tok: {name: encode_split(_split(texts, name), tok, max_length) for name, texts in data.items()}


def logits(model, enc: Encoded) -> torch.Tensor:
    with torch.no_grad():
        return model(**model_inputs(collate(enc, list(range(len(enc)))))).logits


def trim(tok, data: dict[str, list[tuple[str, str | None]]], max_length: int, shown: bool = True,
         model=None) -> tuple[Trimmed, dict[str, torch.Tensor]]:
    """Trim ``model`` (a fresh tiny one) for ``data`` -> (what trimming made, the untrimmed model's
    logits per split); ``shown``: whether trimming is shown the texts behind the encodings."""
    model = model if model is not None else model_for(tok)
    encode = encoder(data, max_length)
    before = encode(tok)
    reference = {name: logits(model, enc) for name, enc in before.items()}
    texts = [t for rows in data.values() for t in rows] if shown else []
    return trim_vocab(model, tok, before, texts, encode), reference


def assert_same_outputs(out: Trimmed, reference: dict[str, torch.Tensor]) -> None:
    for name, enc in out.encodings.items():
        torch.testing.assert_close(logits(out.model, enc), reference[name], atol=1e-5, rtol=0)


def pieces_of(tok) -> set[str]:
    return set(tok.get_vocab())


# -- a word the window cuts ---------------------------------------------------------------------

#: WordPiece: "facetious" is face ##tious; nothing shorter spells the rest (no ##t, ##i, ...).
WORDPIECE = ["the", "face", "##tious", "f", "##a", "##c", "##e", "film", "and", "plot", "a", "b"]
#: BPE: "abc" merges b c first (a, bc); "ab" alone merges a b. Without bc, abc splits ab, c.
BPE = (["a", "b", "c", "x", "bc", "ab", "f", "i", "l", "m", "fi", "fil", "film"],
       [("b", "c"), ("a", "b"), ("f", "i"), ("fi", "l"), ("fil", "m")])
#: Unigram: "▁abc" is best as ▁a, bc (-3.5; ▁ab, c is -4). Without bc, ▁ab, c wins.
UNIGRAM = [("▁", -2.0), ("▁x", -1.0), ("▁a", -2.0), ("▁ab", -1.0), ("a", -3.0), ("b", -3.0), ("c", -3.0),
           ("x", -3.0), ("bc", -1.5), ("▁film", -1.0), ("f", -3.0), ("i", -3.0), ("l", -3.0), ("m", -3.0)]

#: kind -> (tokenizer, the training texts, max_length, the window's last text piece as the untrimmed
#: tokenizer has it, what the trimmed one would make of it had the rest of the word gone).
CUT_WORD = {
    "wordpiece": (lambda: wordpiece(WORDPIECE), [("the facetious film and plot", None), ("a b", None)],
                  4, "face", "<unk>"),
    "bpe": (lambda: bpe(*BPE), [("x abc film", None), ("ab", None)], 4, "a", "ab"),
    "unigram": (lambda: unigram(UNIGRAM), [("x abc film", None), ("ab", None)], 4, "▁a", "▁ab"),
}


@pytest.mark.parametrize("kind", sorted(CUT_WORD))
def test_a_word_cut_by_the_window_keeps_its_pieces_and_the_outputs(kind: str) -> None:
    make, texts, max_length, last, _ = CUT_WORD[kind]
    tok = make()
    assert tok.convert_ids_to_tokens(encoder({"train": texts}, max_length)(tok)["train"].input_ids[0])[-2] == last
    out, reference = trim(tok, {"train": texts}, max_length)
    assert_same_outputs(out, reference)
    kept = pieces_of(out.tokenizer)
    assert "film" not in kept and "▁film" not in kept  # a word wholly past the window is not kept
    assert len(out.tokenizer) == out.model.config.vocab_size < len(tok)


@pytest.mark.parametrize("kind", sorted(CUT_WORD))
def test_a_cut_word_the_trimmer_was_not_shown_is_refused_naming_text_and_piece(kind: str) -> None:
    make, texts, max_length, last, became = CUT_WORD[kind]
    tok = make()
    window = tok.decode(encoder({"train": texts}, max_length)(tok)["train"].input_ids[0], skip_special_tokens=True)
    with pytest.raises(ModelError) as err:
        trim(tok, {"train": texts}, max_length, shown=False)
    message = str(err.value)
    assert repr(window[:80]) in message and "train row 0" in message
    assert f"{last!r}, became {became!r}" in message
    assert "raise task.max_length" in message and "leave trim_vocab out" in message


def test_a_cut_word_whose_start_splits_the_same_is_not_kept_whole() -> None:
    """With ##s, ##u, ##i, ##t, ##o kept (from "suit o"), facetious still starts with face when
    ##tious is gone: the window is the same without it."""
    tok = wordpiece(WORDPIECE + ["suit", "o", "##t", "##i", "##o", "##u", "##s"])
    out, reference = trim(tok, {"train": [("the facetious film", None), ("suit o", None)]}, 4)
    assert_same_outputs(out, reference)
    assert "##tious" not in pieces_of(out.tokenizer) and "##t" in pieces_of(out.tokenizer)


def test_wordpiece_keeps_the_first_pieces_of_a_cut_word_it_was_not_shown() -> None:
    """q ##u ##i ##x ##o ##t ##i ##c, cut after q: the continuation letters of the kept pieces are
    kept, so the rest still splits (into letters) and the word does not turn into one <unk>."""
    tok = tiny_tokenizer("wordpiece")
    texts = [("the quixotic film", None), ("movie fun", None), ("actor x", None)]
    out, reference = trim(tok, {"train": texts}, 4, shown=False)
    assert_same_outputs(out, reference)
    assert {"##u", "##x", "##c"} <= pieces_of(out.tokenizer) and "film" not in pieces_of(out.tokenizer)


def test_a_text_longer_than_the_window_no_longer_aborts_trimming() -> None:
    """The reported case: MiniLM-style WordPiece, texts past max_length, every ##c present."""
    tok = tiny_tokenizer("wordpiece")
    long = "alternating between facetious comic parody and pulp melodrama " * 3
    data = {"train": [(long, None), ("good movie", None), ("bad film", None)], "dev": [(long[::-1], None)]}
    out, reference = trim(tok, data, 12)
    assert_same_outputs(out, reference)
    assert len(out.tokenizer) < len(tok)


def test_at_prediction_a_piece_that_was_not_kept_reads_as_unknown() -> None:
    tok = wordpiece(WORDPIECE)
    out, _ = trim(tok, {"train": CUT_WORD["wordpiece"][1]}, 4)
    ids = out.tokenizer("the plot", truncation=True, max_length=4)["input_ids"]
    assert out.tokenizer.convert_ids_to_tokens(ids) == ["<s>", "the", "<unk>", "</s>"]


# -- pairs: longest_first shares the window by the parts' whole lengths ---------------------------

#: Single letters a-j as words; zzyyxx and wwvvuu split into three pieces each, with no ## letters.
PAIR_PIECES = list("abcdefghij") + ["zz", "##yy", "##xx", "ww", "##vv", "##uu"]
#: A: 10 pieces; B: 5 + 3 + 3 = 11. At max_length 12 (9 after specials) the shorter, A, gets 4 and
#: B 5. Were wwvvuu one [UNK], B would be 9 pieces, the shorter, and the cut would move.
PAIR = ("a b c d e f g h i j", "a b c d e zzyyxx wwvvuu")


def test_a_pair_part_whose_length_past_the_window_would_change_is_kept_whole() -> None:
    tok = wordpiece(PAIR_PIECES)
    data = {"train": [PAIR]}
    window = tok.convert_ids_to_tokens(encoder(data, 12)(tok)["train"].input_ids[0])
    assert window == ["<s>", *"abcd", "</s>", *"abcde", "</s>"]
    out, reference = trim(tok, data, 12)
    assert_same_outputs(out, reference)
    assert {"ww", "##vv", "##uu"} <= pieces_of(out.tokenizer)  # past the window, but B's length needs them
    assert out.encodings["train"].token_type_ids[0] == [0] * 6 + [1] * 6


def test_a_pair_whose_cut_would_move_is_refused_when_its_texts_were_not_shown() -> None:
    tok = wordpiece(PAIR_PIECES)
    window = tok.decode(encoder({"train": [PAIR]}, 12)(tok)["train"].input_ids[0], skip_special_tokens=True)
    with pytest.raises(ModelError) as err:
        trim(tok, {"train": [PAIR]}, 12, shown=False)
    assert f"{window!r} (train row 0, as the model sees it)" in str(err.value)
    assert "piece 5, '</s>', became 'e'" in str(err.value)  # A would take 5 pieces of the window, not 4


@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_pairs_longer_than_the_window_keep_outputs(kind: str) -> None:
    tok = tiny_tokenizer(kind)
    rows = _texts()[:12]
    data = {"train": [(rows[i] + " " + rows[i + 1], rows[i + 2]) for i in range(0, 9, 3)],
            "dev": [(rows[9], rows[10] + " " + rows[11])]}
    out, reference = trim(tok, data, 10)
    assert_same_outputs(out, reference)
    assert len(out.tokenizer) < len(tok)


# -- random texts and windows ---------------------------------------------------------------------

#: Words over four letters: the pieces a tokenizer learns from them overlap in many ways (ab, bc,
#: abc, ...), so a word the window cuts often splits otherwise once its later pieces are gone.
ABCD = [" ".join("".join(random.Random(i * 7 + j).choices("abcd", k=1 + (i + j) % 8)) for j in range(6))
        for i in range(300)]


@functools.cache
def trained(kind: str, corpus: str):
    """A tokenizer trained on ``corpus`` (``words``: the toy sentiment texts, ``abcd``: :data:`ABCD`),
    and a tiny model for it: WordPiece, BPE on whitespace words, byte-level BPE (RoBERTa's kind),
    Unigram (XLM-R's)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    texts, size = (_texts(), 160) if corpus == "words" else (ABCD, 60)
    if kind == "wordpiece":
        raw = Tokenizer(models.WordPiece(unk_token="<unk>"))
        raw.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        trainer = trainers.WordPieceTrainer(vocab_size=size, special_tokens=SPECIALS)
    elif kind == "bpe-whitespace":
        raw = Tokenizer(models.BPE(unk_token="<unk>"))
        raw.pre_tokenizer = pre_tokenizers.Whitespace()
        trainer = trainers.BpeTrainer(vocab_size=size, special_tokens=SPECIALS)
    elif kind == "bpe":
        raw = Tokenizer(models.BPE())
        raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = trainers.BpeTrainer(vocab_size=256 + size, special_tokens=SPECIALS,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    else:
        raw = Tokenizer(models.Unigram())
        raw.pre_tokenizer = pre_tokenizers.Metaspace()
        trainer = trainers.UnigramTrainer(vocab_size=size, special_tokens=SPECIALS, unk_token="<unk>")
    raw.train_from_iterator(texts, trainer)
    tok = _fast(raw)
    return tok, model_for(tok)


WORD_POOL = sorted({w for t in _texts() for w in t.split()})
letters = st.text(alphabet=string.ascii_lowercase + ".,'", min_size=1, max_size=9)
#: Per corpus, the words of random texts. ``words``: known words, words glued from two of them
#: (several pieces each, so the window often cuts one) and random letters (some of which no kept
#: piece spells, so a pair's part past the window changes length). ``abcd``: words over the four
#: letters, now and then random letters.
WORDS = {"words": st.one_of(st.sampled_from(WORD_POOL), letters,
                            st.lists(st.sampled_from(WORD_POOL), min_size=2, max_size=2).map("".join)),
         "abcd": st.one_of(*[st.text(alphabet="abcd", min_size=1, max_size=10)] * 4, letters)}


@st.composite
def datasets(draw, corpus: str) -> tuple[dict[str, list[tuple[str, str | None]]], int]:
    """Train and dev texts (all pairs, or all single texts) and a max_length that cuts many."""
    sentences = st.lists(WORDS[corpus], min_size=1, max_size=12).map(" ".join)
    paired = draw(st.booleans())
    text = st.tuples(sentences, sentences if paired else st.none())
    data = {"train": draw(st.lists(text, min_size=1, max_size=10)),
            "dev": draw(st.lists(text, min_size=1, max_size=3))}
    return data, draw(st.integers(min_value=5 if paired else 3, max_value=24))


@pytest.mark.parametrize("corpus", ["words", "abcd"])
@pytest.mark.parametrize("kind", ["wordpiece", "bpe-whitespace", "bpe", "unigram"])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drawn=st.data())
def test_trimming_keeps_every_window_and_logit(kind: str, corpus: str, drawn) -> None:
    data, max_length = drawn.draw(datasets(corpus))
    tok, model = trained(kind, corpus)
    out, reference = trim(tok, data, max_length, model=copy.deepcopy(model))
    assert_same_outputs(out, reference)
    again = encoder(data, max_length)(out.tokenizer)
    assert all(again[name].input_ids == enc.input_ids for name, enc in out.encodings.items())
