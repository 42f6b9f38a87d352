"""The names of a recipe's students and stages, and which stage may compute the teacher's logits.

Functions of the validated sections (``config.schema``), kept apart so the schema file holds only
the sections; ``schema`` re-exports :func:`student_name`, which most callers import from there.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from tinyplm.config.compress import step_name


class StudentSpec(Protocol):
    """What these functions read of ``config.schema.StudentSpec`` (typed here by its fields, so the
    schema can import this module and not the other way round)."""

    name: str | None
    family: Any
    shape: Any
    arch: str | None
    teacher_layers: list[int] | None
    init_from: str | None
    compress: Sequence[Any]

    @property
    def compress_only(self) -> bool: ...


def student_name(spec: StudentSpec) -> str:
    """The stage name of a student: its explicit name or student-L{layers}-H{hidden} (with its
    ``arch`` before the shape when it is not BERT)."""
    if spec.name:
        return spec.name
    if spec.family:
        return spec.family.arch
    if spec.shape:  # other architectures are named, so same-shaped students of each can sit side by side
        arch = "" if spec.arch in (None, "bert") else f"{spec.arch}-"
        return f"student-{arch}L{spec.shape.layers}-H{spec.shape.hidden}"
    if spec.teacher_layers:
        return f"student-L{len(spec.teacher_layers)}-layers-" + "-".join(map(str, spec.teacher_layers))
    return "student-" + Path(spec.init_from or "init").name


def teacher_copies(students: list[StudentSpec]) -> dict[str, tuple[int, StudentSpec, int]]:
    """The stages that are the teacher itself, compressed: for each compression step of a student
    with ``init_from: teacher`` and ``stages: []``, its stage name -> (the student's place in the
    list, the student, the step's place in its ``compress``)."""
    out = {}
    for i, spec in enumerate(students):
        if spec.init_from == "teacher" and spec.compress_only:
            for k, step in enumerate(spec.compress):
                out[f"{student_name(spec)}.{step_name(step)}"] = (i, spec, k)
    return out


def logits_source_problem(students: list[StudentSpec], named: str) -> str | None:
    """Why stage ``named`` cannot compute the teacher's logits for the students (see
    ``TeacherSpec.logits_from``), or None when it can: it must be a compression step of a copy of
    the teacher, read the teacher's token ids (no trim_vocab up to it), need no teacher logits
    itself (no recovery, no step that ranks units by importance up to it), and be made before any
    student that trains (they learn from its logits)."""
    copies = teacher_copies(students)
    if named not in copies:
        known = ", ".join(copies) or "none in this recipe"
        return ("expected a compression step of a copy of the teacher (a student with init_from: teacher and "
                f"stages: [], its stage named STUDENT.STEP); such stages: {known}")
    place, spec, k = copies[named]
    if any(step.kind == "trim_vocab" for step in spec.compress[: k + 1]):
        return "a stage after trim_vocab reads other token ids than the teacher's; name one before it"
    if any(getattr(step, "recover", None) for step in spec.compress[: k + 1]):
        return "a step up to it recovers by learning the teacher's logits, which it would have to compute itself"
    scoring = next((step for step in spec.compress[: k + 1] if _scores_units(step)), None)
    if scoring is not None:
        return (f"its step {step_name(scoring)} ({scoring.kind}) ranks what to remove by the teacher's logits, "
                "which it would have to compute itself; name a copy whose steps up to it rank nothing (quantization, "
                "a runtime, svd, share), or drop logits_from")
    needs = [student_name(s) for s in students[:place] if not s.compress_only
             or any(getattr(step, "recover", None) or _scores_units(step) for step in s.compress)]
    if needs:
        return (f"student {needs[0]} needs the teacher's logits (to train or to rank what it removes) before {named} "
                f"is made: list {student_name(spec)} first")
    return None


def _scores_units(step) -> bool:
    """Whether a compress step ranks heads, neurons or layers by importance (Taylor scores on the
    teacher's logits, ``compress/steps.py``): structured pruning, and dropping the ``count`` least
    important layers."""
    return step.kind in ("prune_heads", "prune_ffn") or (step.kind == "drop_layers" and step.count is not None)
