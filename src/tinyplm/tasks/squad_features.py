"""SQuAD examples -> model windows, and window logits -> answer texts.

**Features** (as BERT's ``run_squad`` and Hugging Face's ``run_qa``): the question, cut to
``max_query_length`` tokens, is paired with windows of the context of at most ``max_length``
tokens in all; consecutive windows overlap by ``doc_stride`` tokens (Hugging Face's ``stride``
semantics). Each window's label is the (start, end) token of the first gold answer when the answer
lies wholly inside it, else (0, 0): the ``[CLS]`` token, "no answer here".

**Post-processing**: for each example, over all its windows, the ``n_best`` highest start and
end logits are paired; pairs outside the context, reversed, or longer than ``max_answer_length``
tokens are skipped; the best pair's character span is the answer. For v2.0 the null score is the
smallest ``[CLS]`` start + end score over the windows; the answer is empty when null score minus
best span score exceeds a threshold, tuned on dev by ``tinyplm.evaluate.squad.best_null_threshold``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from tinyplm.errors import TinyplmError
from tinyplm.tasks.squad import QAExample


@dataclass(frozen=True)
class QAFeatures:
    """Tokenised windows. ``labels`` ``(N, 2)`` start/end token; ``example`` ``(N,)`` index of the
    example each window comes from; ``offsets`` per window, ``(start_char, end_char)`` for context
    tokens and ``None`` elsewhere."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]]
    labels: torch.Tensor
    example: list[int]
    offsets: list[list[tuple[int, int] | None]]
    pad_id: int

    def __len__(self) -> int:
        return len(self.input_ids)


def _cut_question(question: str, tokenizer, max_query_length: int) -> str:
    enc = tokenizer(question, add_special_tokens=False, return_offsets_mapping=True)
    offsets = enc["offset_mapping"]
    if len(offsets) <= max_query_length:
        return question
    return question[: offsets[max_query_length - 1][1]]


def window_problem(tokenizer, max_length: int, doc_stride: int, max_query_length: int) -> str | None:
    """Why windows of ``max_length`` tokens overlapping by ``doc_stride`` cannot be cut for questions
    of up to ``max_query_length`` tokens by ``tokenizer`` (None when they can): the stride must be
    smaller than a window's context room, which leaves out the special tokens the tokenizer adds to
    a pair (3 for BERT's ``[CLS] q [SEP] c [SEP]``, 4 for RoBERTa's and MPNet's ``<s> q </s></s> c
    </s>``; the tokenizers library panics past it)."""
    specials = int(tokenizer.num_special_tokens_to_add(pair=True))
    room = max_length - max_query_length - specials
    if doc_stride < room:
        return None
    return (f"doc_stride {doc_stride} must be smaller than the context room of a window (max_length {max_length} "
            f"- max_query_length {max_query_length} - {specials} special tokens of this tokenizer = {room})")


def build_features(examples: Sequence[QAExample], tokenizer, max_length: int = 384, doc_stride: int = 128,
                   max_query_length: int = 64) -> QAFeatures:
    """Windows of ``examples`` (see module docstring). Raises ``ValueError`` when ``doc_stride``
    leaves no room for new context in a window (:func:`window_problem`): a ``TinyplmError``, which
    a command prints as its one-line refusal."""
    questions = [_cut_question(ex.question.lstrip(), tokenizer, max_query_length) for ex in examples]
    problem = window_problem(tokenizer, max_length, doc_stride, max_query_length)
    if problem:
        raise TinyplmError(problem)
    enc = tokenizer(questions, [ex.context for ex in examples], truncation="only_second", max_length=max_length,
                    stride=doc_stride, return_overflowing_tokens=True, return_offsets_mapping=True,
                    return_token_type_ids=True, padding=False)
    owners = enc["overflow_to_sample_mapping"]
    labels, offsets = [], []
    for i, owner in enumerate(owners):
        seq = enc.sequence_ids(i)
        offs = [tuple(o) if s == 1 else None for o, s in zip(enc["offset_mapping"][i], seq, strict=True)]
        offsets.append(offs)
        labels.append(_label(examples[owner], offs))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    return QAFeatures([list(x) for x in enc["input_ids"]], [list(x) for x in enc["token_type_ids"]],
                      torch.tensor(labels, dtype=torch.long), list(owners), offsets, int(pad))


def _label(ex: QAExample, offs: list[tuple[int, int] | None]) -> tuple[int, int]:
    if not ex.answers:
        return 0, 0
    a = ex.answers[0]
    first, last = a.start, a.start + len(a.text)
    ctx = [i for i, o in enumerate(offs) if o is not None]
    if not ctx or offs[ctx[0]][0] > first or offs[ctx[-1]][1] < last:
        return 0, 0
    start = next(i for i in ctx if offs[i][1] > first)
    end = next(i for i in reversed(ctx) if offs[i][0] < last)
    return (start, end) if start <= end else (0, 0)  # reversed: no piece covers the answer (zero-width text)


@dataclass(frozen=True)
class Prediction:
    """One example's best span text and score, and its null (no-answer) score; ``start``/``end``
    are the text's character offsets in the context (``-1`` when no span qualified)."""

    text: str
    score: float
    null_score: float
    start: int = -1
    end: int = -1


def predict_answers(examples: Sequence[QAExample], features: QAFeatures, start_logits: Sequence[np.ndarray],
                    end_logits: Sequence[np.ndarray], n_best: int = 20,
                    max_answer_length: int = 30) -> list[Prediction]:
    """Best answer per example from its windows' logits (each ``(window_len,)``, unpadded)."""
    by_example: dict[int, list[int]] = {}
    for f, owner in enumerate(features.example):
        by_example.setdefault(owner, []).append(f)
    out = []
    for e, ex in enumerate(examples):
        best, best_score, null, span = "", -np.inf, np.inf, (-1, -1)
        for f in by_example.get(e, []):
            s, t, offs = np.asarray(start_logits[f]), np.asarray(end_logits[f]), features.offsets[f]
            null = min(null, float(s[0] + t[0]))
            starts = np.argsort(s)[::-1][:n_best]
            ends = np.argsort(t)[::-1][:n_best]
            for i in starts:
                for j in ends:
                    if i >= len(offs) or j >= len(offs) or offs[i] is None or offs[j] is None:
                        continue
                    if j < i or j - i + 1 > max_answer_length:
                        continue
                    score = float(s[i] + t[j])
                    if score > best_score:
                        span = (offs[i][0], offs[j][1])
                        best, best_score = ex.context[span[0] : span[1]], score
        out.append(Prediction(best, float(best_score), float(null), *span))
    return out
