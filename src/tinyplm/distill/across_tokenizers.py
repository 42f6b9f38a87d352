"""The teacher's predictions as targets of a student that reads another tokenizer's pieces.

A student started from a checkpoint of another tokenizer (a MiniLM under an MPNet teacher) reads
the task in its own pieces, the teacher in its own; the two encodings hold the same examples in the
same order (``RunInputs.with_tokenizer``). How the teacher's logits on its encoding become targets
on the student's is a fact of the head, one entry of :data:`ACROSS` each:

- **sequence, embedding**: one prediction (logits, a vector) per example, so row ``i`` of the
  teacher's is the target of row ``i`` of the student's (:func:`by_rows`).
- **token** (CoNLL): one prediction per *word*, read at the word's first piece. The teacher's
  logits at its first piece of word ``w`` become the target at the student's first piece of ``w``
  (:func:`by_words`). A word one tokenizer's ``max_length`` cut off and the other kept has no
  target there: those positions hold NaN, which the KD term skips (``train.head_losses.token_kd``).
- **span** (SQuAD): start and end logits per piece inside windows, which another tokenizer cuts
  elsewhere, so no row of one is a row of the other: they meet on the context's characters
  (:func:`by_spans`, ``distill.span_targets``).

A head with no entry is refused for such a student before any work (``run.preflight``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from tinyplm.distill.span_targets import by_characters
from tinyplm.tasks.encoding import Encoded, padded_width
from tinyplm.tasks.heads import Head, PerHead
from tinyplm.tasks.squad_features import QAFeatures
from tinyplm.tasks.tagging import Tagged


def by_rows(teacher_logits: Tensor, teacher: Encoded, student: Encoded) -> Tensor:
    """One prediction per example: the teacher's rows as they are. Raises ``ValueError`` when the
    two encodings do not hold as many examples."""
    if len(teacher) != len(student):
        raise ValueError(f"the teacher's encoding holds {len(teacher)} examples and the student's {len(student)}: "
                         "targets across tokenizers need the same examples in the same order")
    return teacher_logits


def by_words(teacher_logits: Tensor, teacher: Encoded, student: Encoded) -> Tensor:
    """The teacher's logits ``(N, teacher width, tags)`` at each word's first piece, moved to the
    student's first piece of the same word: ``(N, student width, tags)``, float32, NaN wherever the
    student has no word start or the teacher no logits for that word. Raises ``ValueError`` when
    the encodings hold other sentences (counts, or words of one sentence beyond the other's)."""
    t_meta, s_meta = _tagged(teacher, "teacher"), _tagged(student, "student")
    if len(t_meta) != len(s_meta):
        raise ValueError(f"the teacher's encoding holds {len(t_meta)} sentences and the student's {len(s_meta)}: "
                         "targets across tokenizers need the same sentences in the same order")
    out = torch.full((len(s_meta), student.labels.shape[1], teacher_logits.shape[-1]), float("nan"))
    rows, s_pos, t_pos = [], [], []
    for i in range(len(s_meta)):
        t_first = dict(zip(t_meta.words_of(i), t_meta.first_pieces[i], strict=True))
        for word, piece in zip(s_meta.words_of(i), s_meta.first_pieces[i], strict=True):
            at = t_first.get(word)
            if at is not None and at < teacher_logits.shape[1]:
                rows.append(i)
                s_pos.append(piece)
                t_pos.append(at)
    if rows:
        index = torch.tensor(rows)
        out[index, torch.tensor(s_pos)] = teacher_logits[index, torch.tensor(t_pos)].float()
    return out


def by_spans(teacher_logits: Tensor, teacher: Encoded, student: Encoded) -> Tensor:
    """The teacher's start/end logits ``(teacher windows, seq, 2)`` on the student's windows
    ``(student windows, width, 2)``, moved by the context's characters (``distill.span_targets``)."""
    width = padded_width(int(student.lengths().max(initial=1)))  # every batch's padded width fits
    return by_characters(teacher_logits, _features(teacher, "teacher"), _features(student, "student"), width)


def _features(enc: Encoded, who: str) -> QAFeatures:
    if not isinstance(enc.meta, QAFeatures):
        raise ValueError(f"the {who}'s encoding carries no windows (a span task's encoding does)")
    return enc.meta


def _tagged(enc: Encoded, who: str) -> Tagged:
    if not isinstance(enc.meta, Tagged):
        raise ValueError(f"the {who}'s encoding carries no word alignment (a token task's encoding does)")
    return enc.meta


#: How each head's targets cross tokenizers (module docstring).
ACROSS: PerHead = PerHead("teacher targets across tokenizers",
                          {Head.SEQUENCE: by_rows, Head.EMBEDDING: by_rows, Head.TOKEN: by_words, Head.SPAN: by_spans})


def student_targets(head: Head | str, teacher_logits: Tensor, teacher: Encoded, student: Encoded) -> Tensor:
    """The teacher's logits on ``teacher`` as targets row for row and position for position of
    ``student`` (the same examples in another tokenizer's pieces); ``TinyplmError`` for a head
    without a way across (:data:`ACROSS`)."""
    return ACROSS[head](teacher_logits, teacher, student)
