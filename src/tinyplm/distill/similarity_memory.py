"""A memory of the last trained texts' vectors, for similarity KD across batches.

In-batch similarity KD (:func:`tinyplm.train.vector_losses.similarity_kd`) teaches the student the
teacher's cosines between the texts of one batch. Batches are grouped by length (they pad little and
train several times faster), so a batch of questions never holds a passage, and the cosines that
search depends on, a question's with passages, are never compared. A cross-batch memory (Wang et
al. 2020, "Cross-Batch Memory for Embedding Learning") keeps the vectors of the last ``size``
trained texts, the student's (as they were when trained on) and the teacher's, and the similarity term
also compares each batch with them (:func:`~tinyplm.train.vector_losses.cross_similarity_kd`):
batches come in a shuffled order of lengths, so questions meet passages there. It costs one
``(batch, size)`` matrix per step, and no gradient flows into the memory.

The memory is made of buffers of the objective, so it is saved with every checkpoint and a resumed
stage continues with the memory it had: resume stays exact.
"""

from __future__ import annotations

import torch
from torch import nn


class SimilarityMemory(nn.Module):
    """The vectors of the last ``size`` texts pushed, the student's ``(size, student_dim)`` and the
    teacher's ``(size, teacher_dim)``, overwritten oldest first. Raises ``ValueError`` for a size
    or width < 1."""

    def __init__(self, size: int, student_dim: int, teacher_dim: int) -> None:
        super().__init__()
        for name, value in (("size", size), ("student_dim", student_dim), ("teacher_dim", teacher_dim)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"similarity memory {name} = {value!r}: expected an integer >= 1")
        self.size = size
        self.register_buffer("student", torch.zeros(size, student_dim))
        self.register_buffer("teacher", torch.zeros(size, teacher_dim))
        self.register_buffer("filled", torch.zeros((), dtype=torch.long))  # rows holding a pushed text
        self.register_buffer("next", torch.zeros((), dtype=torch.long))  # the row the next push writes first

    def rows(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The remembered (student, teacher) vectors, ``(m, dim)`` each with ``m <= size`` (0 before the
        first push), detached."""
        m = int(self.filled)
        return self.student[:m].detach(), self.teacher[:m].detach()

    @torch.no_grad()
    def push(self, student: torch.Tensor, teacher: torch.Tensor) -> None:
        """Remember a batch: ``student`` ``(batch, student_dim)`` and ``teacher`` ``(batch, teacher_dim)``
        (only the last ``size`` rows when the batch is larger). Raises ``ValueError`` for other shapes."""
        if student.dim() != 2 or teacher.dim() != 2 or student.shape[0] != teacher.shape[0] \
                or student.shape[1] != self.student.shape[1] or teacher.shape[1] != self.teacher.shape[1]:
            raise ValueError(f"similarity memory: a batch of student {tuple(student.shape)} and teacher "
                             f"{tuple(teacher.shape)} vectors; expected (batch, {self.student.shape[1]}) and "
                             f"(batch, {self.teacher.shape[1]})")
        student, teacher = student[-self.size:], teacher[-self.size:]
        at = (int(self.next) + torch.arange(student.shape[0], device=self.student.device)) % self.size
        self.student[at] = student.detach().to(self.student)
        self.teacher[at] = teacher.detach().to(self.teacher)
        self.next.fill_((int(self.next) + student.shape[0]) % self.size)
        self.filled.fill_(min(self.size, int(self.filled) + student.shape[0]))
