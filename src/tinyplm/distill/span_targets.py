"""A reader's (SQuAD) start and end logits carried to another tokenizer's windows by character.

The teacher scores every piece of each of its windows as the answer's start and end; a student of
another tokenizer reads the same questions and contexts in its own pieces, cut into its own windows.
The two meet on the context's characters (each context piece's offsets, ``QAFeatures.offsets``):

1. **One logit per teacher piece.** A context piece sits in one or more overlapping teacher windows
   (a piece is known across windows by its characters and its rank among the pieces of the same
   characters: a byte-level BPE spells one character ``é`` or ``東`` in several pieces);
   its logits are taken from the window where it has the most context on both sides (BERT's
   "max context" rule: ``min(left, right) + 0.01 * window length``), as raw logits are compared
   across windows when answers are read (``tasks.squad_features.predict_answers``).
2. **Moved to the student's pieces.** In each student window, a teacher piece's *start* logit goes
   to the first student piece holding its first character (or the next piece, when that character
   is a space no piece holds), its *end* logit to the last student piece holding its last character:
   the pieces the student's own answer labels take (``tasks.squad_features``). Where
   several teacher pieces land on one student piece (the student's pieces are longer), their
   logits add as probabilities (log-sum-exp); a student piece no teacher piece lands on (its
   pieces are shorter) gets :data:`NO_MASS`, as do the question and separator pieces.
3. **No answer here.** A window's ``[CLS]`` logits say the answer is not wholly inside it. The
   student window's come from the teacher window that shares the most context characters with it.

The result is logits on the student's positions, which the span KD term softmaxes per window as it
does the teacher's own (``train.head_losses.span_kd``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from tinyplm.tasks.squad_features import QAFeatures

#: The logit of a position that gets no probability (bf16-safe, as ``train.head_losses``).
NO_MASS = -1e4


@dataclass(frozen=True)
class _Pieces:
    """One example's teacher context pieces, one entry per piece (its best-context window's):
    first and end character, start and end logits; sorted by first character."""

    first: np.ndarray
    end: np.ndarray
    start_logit: np.ndarray
    end_logit: np.ndarray


@dataclass(frozen=True)
class _Window:
    """A teacher window's context characters ``[lo, hi)`` and its ``[CLS]`` start and end logits."""

    lo: int
    hi: int
    cls: tuple[float, float]


def by_characters(teacher_logits: Tensor, teacher: QAFeatures, student: QAFeatures, width: int) -> Tensor:
    """The teacher's ``(teacher windows, seq, 2)`` start/end logits as ``(student windows, width, 2)``
    on the student's windows of the same examples (module docstring). Raises ``ValueError`` when
    the two hold other examples."""
    t_examples, s_examples = set(teacher.example), set(student.example)
    if t_examples != s_examples:
        raise ValueError(f"the teacher's windows come from {len(t_examples)} questions and the student's from "
                         f"{len(s_examples)}: targets across tokenizers need the same questions")
    logits = teacher_logits.float().numpy()
    pieces, windows = _teacher_pieces(logits, teacher)
    read = _read_characters(student)
    pieces = {owner: _trimmed(p, read[owner]) for owner, p in pieces.items()}
    out = np.full((len(student), width, 2), NO_MASS, dtype=np.float32)
    for f, owner in enumerate(student.example):
        ctx = np.array([k for k, o in enumerate(student.offsets[f]) if o is not None], dtype=np.int64)
        if len(ctx) == 0:
            continue
        starts = np.array([student.offsets[f][k][0] for k in ctx])
        ends = np.array([student.offsets[f][k][1] for k in ctx])
        lo, hi = int(starts[0]), int(ends[-1])
        p = pieces[owner]
        inside = (p.first >= lo) & (p.end <= hi)
        at_start = np.searchsorted(ends, p.first[inside], side="right")  # the first piece ending past it
        _add_mass(out[f, :, 0], ctx, at_start, p.start_logit[inside])
        at_end = np.searchsorted(starts, p.end[inside] - 1, side="right") - 1
        _add_mass(out[f, :, 1], ctx, at_end, p.end_logit[inside])
        out[f, 0] = _nearest_window(windows[owner], lo, hi).cls
    return torch.from_numpy(out)


def _read_characters(features: QAFeatures) -> dict[int, np.ndarray]:
    """Per example: which characters of its context a piece of ``features`` holds (True), over all
    its windows (a WordPiece tokenizer's pieces hold no space); one pass over the windows."""
    spans: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for f, owner in enumerate(features.example):
        spans[owner].extend(o for o in features.offsets[f] if o is not None)
    read = {}
    for owner, held in spans.items():
        bounds = np.asarray(held, dtype=np.int64).reshape(-1, 2)
        change = np.zeros(int(bounds[:, 1].max(initial=0)) + 2, dtype=np.int64)  # +1 at each first, -1 at each end
        np.add.at(change, bounds[:, 0], 1)
        np.add.at(change, bounds[:, 1], -1)
        read[owner] = np.cumsum(change)[:-1] > 0
    return read


def _trimmed(p: _Pieces, read: np.ndarray) -> _Pieces:
    """``p`` with each piece's characters cut to those from the first to the last that ``read`` marks
    (the student holds): a byte-level BPE or sentencepiece teacher's piece holds the space before its
    word, which a WordPiece student's pieces leave out, so its first character would lie before the
    student's piece of the word (and before a window starting there). A piece of no such character
    stays as it is."""
    at = np.arange(len(read))
    following = np.minimum.accumulate(np.where(read, at, len(read))[::-1])[::-1]  # first read char >= c
    preceding = np.maximum.accumulate(np.where(read, at, -1))  # last read char <= c
    first = np.clip(p.first, 0, len(read) - 1)
    last = np.clip(p.end - 1, 0, len(read) - 1)
    new_first, new_last = following[first], preceding[last]
    keep = (new_first < p.end) & (new_last >= p.first) & (p.end > p.first)
    return _Pieces(np.where(keep, new_first, p.first), np.where(keep, new_last + 1, p.end), p.start_logit, p.end_logit)


def _add_mass(row: np.ndarray, ctx: np.ndarray, at: np.ndarray, values: np.ndarray) -> None:
    """Log-sum-exp ``values`` into ``row`` at the context positions ``ctx[at]`` (``at`` in range)."""
    ok = (at >= 0) & (at < len(ctx))
    if not ok.any():
        return
    acc = np.full(row.shape, -np.inf)
    np.logaddexp.at(acc, ctx[at[ok]], values[ok].astype(np.float64))
    hit = np.isfinite(acc)
    row[hit] = acc[hit]


def _teacher_pieces(logits: np.ndarray, teacher: QAFeatures) -> tuple[dict[int, _Pieces], dict[int, list[_Window]]]:
    """Per example: its context pieces with the logits of their best-context window, and its windows."""
    rows: dict[int, list[np.ndarray]] = defaultdict(list)
    windows: dict[int, list[_Window]] = defaultdict(list)
    for w, owner in enumerate(teacher.example):
        offs = teacher.offsets[w]
        ctx = np.array([k for k, o in enumerate(offs) if o is not None], dtype=np.int64)
        windows[owner].append(_Window(offs[ctx[0]][0] if len(ctx) else 0, offs[ctx[-1]][1] if len(ctx) else 0,
                                      (float(logits[w, 0, 0]), float(logits[w, 0, 1]))))
        if len(ctx) == 0:
            continue
        j = np.arange(len(ctx))
        score = np.minimum(j, len(ctx) - 1 - j) + 0.01 * len(ctx)
        first = np.array([offs[k][0] for k in ctx], dtype=np.float64)
        end = np.array([offs[k][1] for k in ctx], dtype=np.float64)
        rows[owner].append(np.stack([first, end, logits[w, ctx, 0], logits[w, ctx, 1], score,
                                     _rank_among_same(first, end)], axis=1))
    pieces = {}
    for owner, parts in rows.items():
        table = np.concatenate(parts)
        order = np.lexsort((-table[:, 4], table[:, 5], table[:, 1], table[:, 0]))  # a piece's best context first
        table = table[order]
        _, keep = np.unique(table[:, [0, 1, 5]], axis=0, return_index=True)  # sorted by first character
        table = table[keep]
        pieces[owner] = _Pieces(table[:, 0].astype(np.int64), table[:, 1].astype(np.int64), table[:, 2], table[:, 3])
    for owner in windows:
        pieces.setdefault(owner, _Pieces(*(np.zeros(0, dtype=np.int64),) * 2, np.zeros(0), np.zeros(0)))
    return pieces, windows


def _rank_among_same(first: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Each piece's rank among the consecutive pieces of the same characters before it (0 for most;
    1, 2 ... for the second and later byte pieces of one character)."""
    if len(first) == 0:
        return np.zeros(0)
    starts = np.ones(len(first), dtype=bool)  # where a run of pieces of the same characters begins
    starts[1:] = (first[1:] != first[:-1]) | (end[1:] != end[:-1])
    at = np.arange(len(first))
    return (at - np.maximum.accumulate(np.where(starts, at, 0))).astype(np.float64)


def _nearest_window(windows: list[_Window], lo: int, hi: int) -> _Window:
    """The window sharing the most context characters with ``[lo, hi)`` (the first on a tie)."""
    return max(windows, key=lambda w: max(0, min(hi, w.hi) - max(lo, w.lo)))
