"""Layer-wise distillation across tokenizers: positions matched where both tokenizers cut the same
piece, the teacher's features moved onto the student's positions, and the terms computed there."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

from conftest import WORDS, tiny_vocab
from tinyplm.config.schema import ObjectiveSpec
from tinyplm.distill.aligned_pieces import TeacherPieces, align, gather_pairs, gather_positions
from tinyplm.distill.objective import build_objective
from tinyplm.errors import RecipeError
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import collate, encode_split
from tinyplm.train.objective import supervised_batch


def _tokenizer(vocab: list[str]) -> BertTokenizerFast:
    return BertTokenizerFast(vocab={t: i for i, t in enumerate(vocab)}, do_lower_case=True)


def _shifted() -> list[str]:
    """The tiny vocabulary with its special tokens moved to the end: same pieces, other ids."""
    vocab = tiny_vocab()
    return [t for t in vocab if not t.startswith("[")] + [t for t in vocab if t.startswith("[")]


def _split(texts: list[str], pairs: list[str] | None = None) -> Split:
    pairs = pairs or [None] * len(texts)
    return Split("train", [Example(t, p, i % 2, i) for i, (t, p) in enumerate(zip(texts, pairs, strict=True))], None)


def _both(texts, pairs=None, teacher_vocab=None, student_vocab=None, max_length=32):
    t_tok, s_tok = _tokenizer(teacher_vocab or tiny_vocab()), _tokenizer(student_vocab or _shifted())
    split = _split(texts, pairs)
    return encode_split(split, t_tok, max_length), t_tok, encode_split(split, s_tok, max_length), s_tok


texts_strategy = st.lists(st.lists(st.sampled_from(WORDS + ["zq", "xyzzy", "!", "."]), min_size=1, max_size=12)
                          .map(" ".join), min_size=1, max_size=6)


@settings(max_examples=20, deadline=None)
@given(texts_strategy)
def test_the_same_pieces_in_other_ids_align_position_for_position(texts: list[str]) -> None:
    """MPNet's case: one vocabulary in other ids: every position aligned with itself."""
    t_enc, t_tok, s_enc, s_tok = _both(texts)
    assert t_enc.input_ids != s_enc.input_ids  # other ids ...
    a = align(t_enc, t_tok, s_enc, s_tok)
    assert a.aligned == a.total and a.share == 1.0
    for i, ids in enumerate(s_enc.input_ids):
        assert a.positions[i, : len(ids)].tolist() == list(range(len(ids)))  # ... the same positions
        assert (a.positions[i, len(ids):] == -1).all()


@settings(max_examples=20, deadline=None)
@given(texts_strategy)
def test_aligned_positions_hold_the_same_characters(texts: list[str]) -> None:
    """A student vocabulary without some whole words cuts them into letters: those positions stay
    unaligned, and every aligned pair of ordinary pieces writes the same text."""
    dropped = set(WORDS[::2])
    student_vocab = [t for t in _shifted() if t not in dropped]
    t_enc, t_tok, s_enc, s_tok = _both(texts, student_vocab=student_vocab)
    a = align(t_enc, t_tok, s_enc, s_tok)
    for i in range(len(texts)):
        t_pieces = t_tok.convert_ids_to_tokens(t_enc.input_ids[i])
        s_pieces = s_tok.convert_ids_to_tokens(s_enc.input_ids[i])
        for s_pos, t_pos in enumerate(a.positions[i, : len(s_pieces)].tolist()):
            if t_pos >= 0:
                assert s_pieces[s_pos].removeprefix("##") == t_pieces[t_pos].removeprefix("##")
            else:  # a letter of a word the teacher keeps whole
                assert len(s_pieces[s_pos].removeprefix("##")) == 1
        assert a.positions[i, 0] == 0 and a.positions[i, len(s_pieces) - 1] == len(t_pieces) - 1  # [CLS], [SEP]
    words_kept = all(w not in dropped for t in texts for w in t.split())
    assert (a.share == 1.0) == words_kept


def test_specials_pair_in_order_or_first_and_last() -> None:
    """``[CLS] a [SEP] b [SEP]`` against MPNet's ``<s> a </s></s> b </s>``: the first and last
    special tokens pair, the teacher's doubled separator has no student position."""
    t_enc, t_tok, s_enc, s_tok = _both([WORDS[0]], [WORDS[1]])
    extra = list(t_enc.input_ids[0])
    sep = t_tok.sep_token_id
    at = extra.index(sep)
    t_enc.input_ids[0][:] = extra[: at + 1] + [sep] + extra[at + 1:]  # <s> a </s></s> b </s>
    a = align(t_enc, t_tok, s_enc, s_tok)
    assert a.positions[0, :5].tolist() == [0, 1, -1, 4, 5]
    assert a.aligned == 4 and a.total == 5


def test_after_an_unknown_piece_nothing_aligns() -> None:
    """A piece one tokenizer writes otherwise (``[UNK]``) breaks the written text: later pieces of
    the example are not trusted to hold the same characters."""
    student_vocab = [t for t in _shifted() if t not in ("q", "##q")]
    t_enc, t_tok, s_enc, s_tok = _both([f"{WORDS[0]} q {WORDS[1]}"], student_vocab=student_vocab)
    assert s_tok.unk_token_id in s_enc.input_ids[0]
    a = align(t_enc, t_tok, s_enc, s_tok)
    assert a.positions[0].tolist()[:5] == [0, 1, -1, -1, 4]  # [CLS], the first word, [UNK], the word after, [SEP]


def test_a_pair_cut_at_other_places_aligns_no_piece_across_its_texts() -> None:
    """Two tokenizers cutting a pair's first text at other lengths: the second text's pieces were
    aligned with the first text's (the written pieces ran on without a boundary, and a repeated word
    matched); each piece is now aligned only with a piece of its own text."""
    word = WORDS[0]
    first, second = " ".join([word] * 12), " ".join([word] * 4)
    t_enc, t_tok, _, _ = _both([first], [second], max_length=12)
    _, _, s_enc, s_tok = _both([first], [second], max_length=16)
    a = align(t_enc, t_tok, s_enc, s_tok)
    t_types, s_types = t_enc.token_type_ids[0], s_enc.token_type_ids[0]
    pairs = [(s, t) for s, t in enumerate(a.positions[0, :len(s_types)].tolist()) if t >= 0]
    assert pairs and all(s_types[s] == t_types[t] for s, t in pairs)


def test_gathers_match_indexing() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 5, 3)
    maps = torch.randn(2, 4, 5, 5)
    rows = torch.tensor([[0, 2, -1, 4], [1, -1, 3, 0]])
    moved = gather_positions(x, rows)
    pairs = gather_pairs(maps, rows)
    for b in range(2):
        for j, p in enumerate(rows[b].tolist()):
            assert torch.equal(moved[b, j], x[b, p] if p >= 0 else torch.zeros(3))
            for k, q in enumerate(rows[b].tolist()):
                if p >= 0 and q >= 0:
                    assert torch.equal(pairs[b, :, j, k], maps[b, :, p, q])


def _bert(vocab_size: int, seed: int) -> BertForSequenceClassification:
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64)
    return BertForSequenceClassification(cfg).eval()


def test_the_terms_across_tokenizers_equal_the_terms_on_shared_ids() -> None:
    """With one vocabulary in other ids, the teacher run on its own encoding and moved onto the
    student's positions gives the layer-wise terms it gives on the student's positions directly."""
    texts = ["the film was good .", "bad", "a movie , not a good one !"]
    t_enc, t_tok, s_enc, s_tok = _both(texts)
    teacher, student = _bert(len(tiny_vocab()), 0), _bert(len(tiny_vocab()), 1)
    # the same teacher reading the student's ids: its word rows permuted as the ids are
    permuted = _bert(len(tiny_vocab()), 0)
    t_vocab, s_vocab = t_tok.get_vocab(), s_tok.get_vocab()
    order = torch.tensor([t_vocab[p] for p, _ in sorted(s_vocab.items(), key=lambda kv: kv[1])])
    with torch.no_grad():
        words = teacher.bert.embeddings.word_embeddings.weight
        permuted.bert.embeddings.word_embeddings.weight.copy_(words[order])
    spec = ObjectiveSpec(kd_weight=0.0, embedding=1.0, hidden=1.0, attention_scores=1.0, qkv_relation=1.0)
    across = build_objective(spec, student.config, teacher.config, False)
    across.read_teacher_from(TeacherPieces(t_enc, align(t_enc, t_tok, s_enc, s_tok)))
    shared = build_objective(spec, student.config, teacher.config, False)
    batch = supervised_batch(collate(s_enc, [2, 0, 1]))
    with torch.no_grad():
        moved = across.teacher_outputs(teacher, batch)
        direct = shared.teacher_outputs(permuted, batch)
        s = across._features(student, batch)
        _, parts_across = across.terms(s, moved, batch.targets, None)
        _, parts_shared = shared.terms(s, direct, batch.targets, None)
    assert set(parts_across) == {"embedding", "hidden", "attention_scores", "qkv_relation"}
    for name, value in parts_shared.items():
        assert abs(parts_across[name] - value) < 1e-4 * max(1.0, abs(value)), name


def test_attention_kl_is_refused_across_tokenizers() -> None:
    t_enc, t_tok, s_enc, s_tok = _both(["good"])
    teacher = _bert(len(tiny_vocab()), 0)
    objective = build_objective(ObjectiveSpec(kd_weight=1.0, attention_kl=1.0), teacher.config, teacher.config, False)
    try:
        objective.read_teacher_from(TeacherPieces(t_enc, align(t_enc, t_tok, s_enc, s_tok)))
    except RecipeError as exc:
        assert "attention_kl" in str(exc) and "qkv_relation" in str(exc)
    else:
        raise AssertionError("attention_kl across tokenizers was not refused")
