"""Layer-wise distillation across tokenizers: the positions where both tokenizers cut the same piece.

A student that reads another tokenizer (a MiniLM under an MPNet teacher) sees the same examples in
other token ids, and often in other pieces: its layer-wise terms (hidden states, attention scores,
relations) have no teacher position to compare with until the two sequences are matched. Two
pieces match when they hold the same characters of the same text: each tokenizer's pieces are
written out (the id's piece, without its continuation mark: ``##`` of WordPiece, ``Ġ`` of byte-level
BPE, ``▁`` of SentencePiece; lower-cased), and a student piece whose character span in that
writing is the span of a teacher piece is aligned with it, as long as the two writings agree up to
its end (after a piece that one tokenizer writes otherwise, an ``[UNK]`` or a byte-level
character, nothing later in the example is aligned). Special tokens pair in order when both
sequences hold as many (``[CLS] a [SEP] b [SEP]``), else the first with the first and the last with
the last (MPNet's ``<s> a </s></s> b </s>``).

Tokenizers of one vocabulary in other ids (MPNet's ids are BERT's shifted by 4) align everywhere;
a WordPiece and a BPE vocabulary align on the words both keep whole. :func:`align` returns a
:class:`PieceAlignment`: for each example and student position the teacher position, or -1, and
the share of the student's positions aligned, which the stage logs. The objective
(``distill.objective``) runs the teacher on its own encoding of the batch's examples and moves its
features to the student's positions (:func:`gather_positions`, :func:`gather_pairs`); unaligned
positions are left out of every layer-wise term, as padding is.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import Tensor

from tinyplm.config.base import MLM_TERMS
from tinyplm.models.features import Features
from tinyplm.tasks.encoding import Encoded
from tinyplm.tasks.heads import Head

#: The heads whose encodings hold one row per example (or sentence) on either tokenizer, so that a
#: student of another tokenizer can learn layer by layer on the aligned positions; a reader's
#: windows are cut where each tokenizer's pieces fall, so its rows do not match.
ALIGNED_HEADS = frozenset({Head.SEQUENCE, Head.TOKEN})
#: Terms that compare distributions over one tokenizer's pieces: never across tokenizers.
SHARED_ID_TERMS = ("attention_kl", *MLM_TERMS)

#: Marks a piece's tokenizer writes for "continues a word" or "starts after a space".
PIECE_MARKS = ("##", "\u0120", "\u2581")


@dataclass(frozen=True)
class PieceAlignment:
    """``positions`` ``(N, width)`` int64: the teacher position of student position ``j`` of example
    ``i``, -1 where none (or beyond the student's sequence). ``aligned``/``total``: aligned and
    all real student positions over the split."""

    positions: Tensor
    aligned: int
    total: int

    @property
    def share(self) -> float:
        """The share of the student's real positions that have a teacher position."""
        return self.aligned / self.total if self.total else 0.0

    def rows(self, index: Tensor, width: int) -> Tensor:
        """The rows of the examples at ``index``, cut or padded (-1) to ``width`` positions."""
        out = self.positions[index.long(), :width]
        if out.shape[1] < width:
            out = torch.nn.functional.pad(out, (0, width - out.shape[1]), value=-1)
        return out


#: Written where a run of special tokens stands (``[SEP]``, MPNet's ``</s></s>``): the texts of a pair
#: are told apart, so when the two tokenizers cut the first text at other places the second text's
#: pieces are not aligned with the first's (the writings disagree from the cut on).
BOUNDARY = "\0"


def _spans(ids: list[int], tokenizer, special: frozenset[int]) -> tuple[list[int], str, list[tuple[int, int]]]:
    """(positions of special tokens, the pieces written out with a :data:`BOUNDARY` for each run of
    special tokens, the character span of each position: (-1, -1) for a special token)."""
    specials, spans, text = [], [], []
    at = 0
    for pos, piece in enumerate(tokenizer.convert_ids_to_tokens(ids)):
        if ids[pos] in special:
            specials.append(pos)
            spans.append((-1, -1))
            if not text or text[-1] != BOUNDARY:
                text.append(BOUNDARY)
                at += 1
            continue
        word = piece or ""
        for mark in PIECE_MARKS:
            word = word.removeprefix(mark)
        word = word.lower()
        spans.append((at, at + len(word)))
        text.append(word)
        at += len(word)
    return specials, "".join(text), spans


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _special_pairs(s: list[int], t: list[int]) -> list[tuple[int, int]]:
    if not s or not t:
        return []
    if len(s) == len(t):
        return list(zip(s, t, strict=True))
    return [(s[0], t[0]), (s[-1], t[-1])]


def _special_ids(tokenizer) -> frozenset[int]:
    """Special token ids but the unknown token's (an ``[UNK]`` stands for text, not structure)."""
    unk = getattr(tokenizer, "unk_token_id", None)
    return frozenset(int(i) for i in tokenizer.all_special_ids if i != unk)


def align(teacher: Encoded, teacher_tokenizer, student: Encoded, student_tokenizer) -> PieceAlignment:
    """The student's positions matched with the teacher's, example by example (see the module
    docstring). Raises ``ValueError`` when the encodings hold different numbers of examples."""
    if len(teacher) != len(student):
        raise ValueError(f"the teacher's encoding holds {len(teacher)} examples and the student's {len(student)}: "
                         "positions across tokenizers need the same examples in the same order")
    width = int(student.lengths().max(initial=1))
    out = np.full((len(student), width), -1, dtype=np.int64)
    t_special, s_special = _special_ids(teacher_tokenizer), _special_ids(student_tokenizer)
    aligned = 0
    for i in range(len(student)):
        t_sp, t_text, t_spans = _spans(teacher.input_ids[i], teacher_tokenizer, t_special)
        s_sp, s_text, s_spans = _spans(student.input_ids[i], student_tokenizer, s_special)
        agree = _common_prefix(t_text, s_text)
        by_span = {span: pos for pos, span in enumerate(t_spans) if span[0] >= 0 and span[1] > span[0]}
        for pos, span in enumerate(s_spans):
            if span[0] >= 0 and span[1] <= agree and span in by_span:
                out[i, pos] = by_span[span]
        for s_pos, t_pos in _special_pairs(s_sp, t_sp):
            out[i, s_pos] = t_pos
        aligned += int((out[i] >= 0).sum())
    return PieceAlignment(torch.from_numpy(out), aligned, int(student.lengths().sum()))


def gather_positions(x: Tensor, rows: Tensor) -> Tensor:
    """``x`` ``(batch, teacher seq, d)`` at the teacher positions ``rows`` ``(batch, student seq)``:
    ``(batch, student seq, d)``, zeros where a row holds -1."""
    index = rows.clamp_min(0)[:, :, None].expand(-1, -1, x.shape[-1])
    out = x.gather(1, index)
    return out * (rows >= 0)[:, :, None].to(out.dtype)


def gather_pairs(x: Tensor, rows: Tensor) -> Tensor:
    """Attention maps ``x`` ``(batch, heads, teacher seq, teacher seq)`` at the teacher positions
    ``rows`` on both axes: ``(batch, heads, student seq, student seq)`` (unaligned rows and columns
    hold whatever position 0 held: every term masks them out)."""
    b, h, _, t = x.shape
    s = rows.shape[1]
    r = rows.clamp_min(0)
    x = x.gather(2, r[:, None, :, None].expand(b, h, s, t))
    return x.gather(3, r[:, None, None, :].expand(b, h, s, s))


@dataclass(frozen=True)
class TeacherPieces:
    """What a layer-wise stage needs to run its teacher beside a student of another tokenizer: the
    teacher's encoding of the stage's examples (row for row the student's) and the alignment."""

    encoding: Encoded
    alignment: PieceAlignment


#: The features moved position by position, and those moved on both axes (attention maps).
BY_POSITION = ("embeddings", "hidden", "queries", "keys", "values")
BY_PAIR = ("attn_scores", "attn_probs")


def on_student_positions(features: Features, rows: Tensor) -> Features:
    """``features`` (of the teacher's batch) on the student's
    positions ``rows`` ``(batch, student seq)``; its ``attention_mask`` marks the aligned positions,
    the only ones the layer-wise terms compare."""
    moved = {"attention_mask": (rows >= 0).long()}
    for name in BY_POSITION:
        value = getattr(features, name)
        if value is not None:
            moved[name] = [gather_positions(x, rows) for x in value] if isinstance(value, list) \
                else gather_positions(value, rows)
    for name in BY_PAIR:
        value = getattr(features, name)
        if value is not None:
            moved[name] = [gather_pairs(x, rows) for x in value]
    return replace(features, **moved)
