"""Losses between sentence vectors ``(batch, dim)``, as pure functions: what an embedding student
is pulled towards (:mod:`tinyplm.distill.embedding` weighs them) and what the importance of its heads
and neurons is measured by (:mod:`tinyplm.compress.importance`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _check_vectors(name: str, x: torch.Tensor) -> None:
    """Raise ``ValueError`` unless ``x`` is a non-empty ``(batch, dim)`` tensor."""
    if x.dim() != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"{name}: expected non-empty (batch, dim) vectors, got shape {tuple(x.shape)}")


def _check_pair(student: torch.Tensor, teacher: torch.Tensor) -> None:
    """Raise ``ValueError`` unless both are ``(batch, dim)`` vectors of one shape."""
    _check_vectors("student", student)
    _check_vectors("teacher", teacher)
    if student.shape != teacher.shape:
        raise ValueError(f"student vectors {tuple(student.shape)} and teacher vectors {tuple(teacher.shape)} "
                         "differ in shape; project the student to the teacher's width first")


def vector_mse(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Mean squared error per element between ``student`` and ``teacher``, both ``(batch, dim)``
    (sentence-transformers' ``MSELoss``), in float32. Raises ``ValueError`` when the shapes differ
    or are not non-empty ``(batch, dim)``."""
    _check_pair(student, teacher)
    return F.mse_loss(student.float(), teacher.float())


def cosine_loss(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Mean over the batch of ``1 - cos(student_i, teacher_i)``, both ``(batch, dim)``: in [0, 2],
    unchanged when either side is scaled by a positive factor. Raises ``ValueError`` as
    :func:`vector_mse`."""
    _check_pair(student, teacher)
    return (1.0 - F.cosine_similarity(student.float(), teacher.float(), dim=-1)).mean()


def cosine_matrix(x: torch.Tensor) -> torch.Tensor:
    """Pairwise cosines of the rows of ``x`` ``(batch, dim)`` -> ``(batch, batch)`` (a zero row
    has cosine 0 with every row)."""
    unit = F.normalize(x.float(), dim=-1)
    return unit @ unit.T


def similarity_kd(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """In-batch similarity KD: MSE between the student's pairwise cosine matrix and the teacher's.

    ``student`` ``(batch, student_dim)``, ``teacher`` ``(batch, teacher_dim)``: the widths may
    differ, the batch must not. Each side gives a ``(batch, batch)`` cosine matrix; the loss is the
    mean squared difference over all its ``batch * batch`` entries (the diagonal, 1 on both sides,
    adds nothing). Zero whenever the student's vectors are the teacher's under one common rotation
    (or an isometry into a wider space), each row rescaled by its own positive factor. Raises
    ``ValueError`` when the batch sizes differ or either side is not non-empty ``(batch, dim)``.
    """
    _check_vectors("student", student)
    _check_vectors("teacher", teacher)
    if student.shape[0] != teacher.shape[0]:
        raise ValueError(f"student batch {student.shape[0]} and teacher batch {teacher.shape[0]} differ")
    return F.mse_loss(cosine_matrix(student), cosine_matrix(teacher))


def cross_similarity_kd(student: torch.Tensor, teacher: torch.Tensor, memory_student: torch.Tensor,
                        memory_teacher: torch.Tensor) -> torch.Tensor:
    """Similarity KD against a memory of earlier batches (cross-batch memory, Wang et al. 2020):
    MSE between the student's cosines of each batch row with every row of ``[batch; memory]`` and
    the teacher's, ``(batch, batch + memory)`` entries each side.

    ``memory_student`` ``(m, student_dim)`` and ``memory_teacher`` ``(m, teacher_dim)`` are the
    same ``m`` earlier texts' vectors (the student's from when they were trained on, used as fixed
    points: no gradient flows into them). With ``m`` 0 this is :func:`similarity_kd`. Raises
    ``ValueError`` when the batch or memory sizes differ between the sides, or a width differs from
    its side's batch."""
    _check_vectors("student", student)
    _check_vectors("teacher", teacher)
    if student.shape[0] != teacher.shape[0]:
        raise ValueError(f"student batch {student.shape[0]} and teacher batch {teacher.shape[0]} differ")
    if memory_student.shape[0] != memory_teacher.shape[0]:
        raise ValueError(f"student memory {memory_student.shape[0]} rows and teacher memory "
                         f"{memory_teacher.shape[0]} rows differ")
    if memory_student.shape[0] == 0:
        return similarity_kd(student, teacher)
    for name, batch, memory in (("student", student, memory_student), ("teacher", teacher, memory_teacher)):
        if memory.dim() != 2 or memory.shape[1] != batch.shape[1]:
            raise ValueError(f"{name} memory of shape {tuple(memory.shape)}: expected (m, {batch.shape[1]})")

    def cosines(batch: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        unit = F.normalize(batch.float(), dim=-1)
        return unit @ torch.cat([unit, F.normalize(memory.detach().float(), dim=-1)]).T

    return F.mse_loss(cosines(student, memory_student), cosines(teacher, memory_teacher))
