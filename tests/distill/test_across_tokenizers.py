"""The teacher's predictions carried to a student of another tokenizer (distill/across_tokenizers.py):
a tagger's per word, from the teacher's first piece of each word to the student's, NaN where one
side's max_length cut the word off; the span head has no way across and is named."""

from __future__ import annotations

import math
import string
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import BertTokenizerFast

from conftest import WORDS, tiny_vocab
from tinyplm.distill.across_tokenizers import by_rows, by_words, student_targets
from tinyplm.distill.span_targets import NO_MASS
from tinyplm.errors import TinyplmError
from tinyplm.tasks.base import Split
from tinyplm.tasks.conll import TAGS, Sentence
from tinyplm.tasks.encoding import encode_split
from tinyplm.tasks.heads import Head, PerHead
from tinyplm.tasks.squad import Answer, QAExample
from tinyplm.tasks.tagging import IGNORE
from tinyplm.train.head_losses import token_kd


def _words_tokenizer() -> BertTokenizerFast:
    return BertTokenizerFast(vocab={t: i for i, t in enumerate(tiny_vocab())}, do_lower_case=True)


def _letters_tokenizer() -> BertTokenizerFast:
    """Every word in letter pieces ('movie' -> m ##o ##v ##i ##e): other pieces, other positions."""
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *string.ascii_lowercase,
             *("##" + c for c in string.ascii_lowercase), *".,!?'-"]
    return BertTokenizerFast(vocab={t: i for i, t in enumerate(vocab)}, do_lower_case=True)


def _encode(sentences: list[list[str]], tok, max_length: int):
    examples = [Sentence(tuple(s), tuple("O" for _ in s), i) for i, s in enumerate(sentences)]
    return encode_split(Split("train", examples, Path("x"), Head.TOKEN, {"tags": TAGS}), tok, max_length)


@settings(max_examples=40, deadline=None)
@given(sentences=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12), min_size=1, max_size=6),
       teacher_len=st.integers(4, 40), student_len=st.integers(4, 40))
def test_each_words_target_is_the_teachers_logits_at_its_first_piece_of_that_word(
        sentences: list[list[str]], teacher_len: int, student_len: int) -> None:
    teacher = _encode(sentences, _letters_tokenizer(), teacher_len)
    student = _encode(sentences, _words_tokenizer(), student_len)
    width = int(teacher.lengths().max())
    logits = torch.full((len(teacher), width, 2), -1.0)  # a word's logits say which word it is
    for i, (firsts, words) in enumerate(zip(teacher.meta.first_pieces, teacher.meta.first_words, strict=True)):
        for piece, word in zip(firsts, words, strict=True):
            logits[i, piece] = torch.tensor([float(word), float(i)])
    moved = by_words(logits, teacher, student)
    assert moved.shape == (len(student), student.labels.shape[1], 2)
    for i in range(len(sentences)):
        kept_by_teacher = set(teacher.meta.first_words[i])
        targets = {piece: word for piece, word in zip(student.meta.first_pieces[i], student.meta.first_words[i],
                                                        strict=True)}
        for p in range(student.labels.shape[1]):
            row = moved[i, p].tolist()
            if p in targets and targets[p] in kept_by_teacher:
                assert row == [float(targets[p]), float(i)]
            else:  # not a word start of the student's, or a word the teacher's pieces did not reach
                assert all(math.isnan(v) for v in row)


def test_the_kd_term_skips_words_without_a_teachers_target() -> None:
    sentences = [["the", "movie", "was", "good", "and", "the", "plot", "was", "dull"]]
    teacher = _encode(sentences, _letters_tokenizer(), 12)  # reaches the first words only
    student = _encode(sentences, _words_tokenizer(), 16)
    logits = torch.randn(len(teacher), int(teacher.lengths().max()), len(TAGS))
    moved = by_words(logits, teacher, student)
    kept = (student.labels != IGNORE) & ~moved.isnan().any(-1)
    assert 0 < int(kept.sum()) < int((student.labels != IGNORE).sum())
    s_logits = torch.randn(1, student.labels.shape[1], len(TAGS), requires_grad=True)
    loss = token_kd(s_logits, moved, student.labels, 2.0)
    assert torch.isfinite(loss)
    loss.backward()
    touched = s_logits.grad.abs().sum(-1)[0] > 0
    assert touched.tolist() == kept[0].tolist()  # only the words the teacher scored pull on the student


def test_sentences_that_differ_and_a_span_head_are_named() -> None:
    teacher = _encode([["the", "movie"]], _letters_tokenizer(), 16)
    student = _encode([["the", "movie"], ["a", "plot"]], _words_tokenizer(), 16)
    with pytest.raises(ValueError, match="the teacher's encoding holds 1 sentences and the student's 2"):
        by_words(torch.zeros(1, 16, 2), teacher, student)
    with pytest.raises(ValueError, match="the teacher's encoding carries no windows"):
        student_targets(Head.SPAN, torch.zeros(1, 16, 2), teacher, student)
    narrow = PerHead("teacher targets across tokenizers", {Head.SEQUENCE: by_rows})
    with pytest.raises(TinyplmError, match="the span head has no teacher targets across tokenizers"):
        narrow[Head.SPAN]
    same = student_targets(Head.SEQUENCE, torch.ones(2, 3), student, student)
    assert same.shape == (2, 3)


def _windows(examples: list[QAExample], tok, max_length: int, stride: int):
    split = Split("train", examples, Path("x"), Head.SPAN, {"doc_stride": stride, "max_query_length": 6})
    return encode_split(split, tok, max_length)


def _contexts(words: list[str]):
    return st.lists(st.tuples(st.lists(st.sampled_from(words), min_size=0, max_size=30),
                              st.lists(st.sampled_from(words), min_size=1, max_size=3),
                              st.lists(st.sampled_from(words), min_size=0, max_size=30)), min_size=1, max_size=3)


def _assert_moved_spans(contexts, teacher_tok, student_tok, teacher_len: int, student_len: int) -> None:
    """The teacher puts its highest start and end logits on the answer's first and last pieces (of
    a character spelled in several pieces, the first and the last of them) in every window that
    has them, and its [CLS] logits high where the answer is not wholly inside:
    in each student window holding the answer whole the moved logits peak exactly at the student's
    own answer pieces (of other lengths, at other positions), and its question and separator
    pieces get no mass."""
    examples = []
    for i, (before, answer, after) in enumerate(contexts):
        head = " ".join(before)
        text = " ".join(answer)
        context = " ".join(x for x in (head, text, " ".join(after)) if x)
        start = len(head) + 1 if head else 0
        examples.append(QAExample(f"q{i}", "what was it", context, (Answer(text, start),)))
    teacher = _windows(examples, teacher_tok, teacher_len, teacher_len // 4)
    student = _windows(examples, student_tok, student_len, student_len // 4)
    logits = torch.zeros(len(teacher), int(teacher.lengths().max()), 2)
    for w, owner in enumerate(teacher.meta.example):
        answer = examples[owner].answers[0]
        offsets = teacher.meta.offsets[w]
        first, end = answer.start, answer.start + len(answer.text)
        for k, here in enumerate(offsets):  # the first piece holding the answer's first character, the last its last
            before, after = offsets[k - 1] if k else None, offsets[k + 1] if k + 1 < len(offsets) else None
            if here is not None and here[0] <= first < here[1] and (before is None or before[1] <= first):
                logits[w, k, 0] = 20.0
            if here is not None and here[0] < end <= here[1] and (after is None or after[0] >= end):
                logits[w, k, 1] = 20.0
        if teacher.labels[w, 0] == 0:
            logits[w, 0] = 10.0  # the answer is not wholly in this window
    moved = student_targets(Head.SPAN, logits, teacher, student)
    assert moved.shape[0] == len(student) and moved.shape[1] >= int(student.lengths().max())
    for v, (first, last) in enumerate(student.labels.tolist()):
        if first == 0:
            continue
        assert int(moved[v, :, 0].argmax()) == first and int(moved[v, :, 1].argmax()) == last
        assert moved[v, first, 0] > 19.0 and moved[v, last, 1] > 19.0  # the teacher's mass, not a lesser piece's
        question = [k for k, o in enumerate(student.meta.offsets[v]) if o is None and k > 0]
        assert (moved[v, question] == NO_MASS).all()  # question and separator pieces get no mass


@settings(max_examples=40, deadline=None)
@given(contexts=_contexts(WORDS), teacher_len=st.integers(24, 64), student_len=st.integers(24, 64))
def test_a_right_teachers_spans_are_right_on_the_students_windows(contexts, teacher_len: int,
                                                                  student_len: int) -> None:
    _assert_moved_spans(contexts, _letters_tokenizer(), _words_tokenizer(), teacher_len, student_len)


#: Words a byte-level BPE spells in several pieces of the same characters (one per UTF-8 byte).
NON_ASCII = ["café", "東京", "naïve", "Ōsaka", "Édouard", "über"]


@settings(max_examples=30, deadline=None)
@given(contexts=_contexts(WORDS[:12] + NON_ASCII), teacher_len=st.integers(32, 64), student_len=st.integers(32, 64),
       bpe_teaches=st.booleans())
def test_spans_of_characters_a_byte_level_bpe_spells_in_several_pieces(contexts, teacher_len: int,
                                                                       student_len: int, bpe_teaches: bool) -> None:
    """A byte-level BPE teacher's pieces were told apart by their first character alone, so of the
    two pieces of 'é' or '東' one was dropped (with it, an answer's start or end mass); a byte-level
    BPE student got a start on the last of a character's pieces, its own label on the first."""
    from helpers_families import tiny_tokenizer

    bpe, words = tiny_tokenizer("bpe"), _words_tokenizer()
    pair = (bpe, words) if bpe_teaches else (words, bpe)
    _assert_moved_spans(contexts, *pair, teacher_len, student_len)
