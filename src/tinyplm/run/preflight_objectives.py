"""Each student's distillation objective checked against its shape and the teacher's before any work.

The layer-wise terms compare a student's layers, heads and widths with the teacher's: attention maps
one to one need as many heads, a ``layer_map`` must name layers both have, ``relation_heads`` must
divide both widths. :class:`~tinyplm.distill.objective.DistillObjective` refuses such a recipe when
it is built, which a run does only after the teacher's fine-tune. :func:`check_objectives` builds each
trained stage's objective here, on the shapes alone (no weights), so validate and run refuse the
recipe first, naming the student and stage.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tinyplm.config.base import MLM_TERMS
from tinyplm.config.schema import RunConfig, ShapeSpec, StudentSpec, student_name
from tinyplm.distill.objective import DistillObjective
from tinyplm.errors import RecipeError, TinyplmError
from tinyplm.models import check_model_dir, resolve_model_dir
from tinyplm.models.student import teacher_shape
from tinyplm.tasks.heads import Head


def check_objectives(cfg: RunConfig, model_cfg: dict, src: Path, head: Head) -> None:
    """Build every layer-wise stage objective of every transformer student against the teacher's
    shape (``model_cfg``, its config.json) and the student's; raises ``RecipeError`` naming the
    student and stage (and the teacher ``src``) for what the objective refuses. A student whose shape
    cannot be known from the recipe and the checkpoints it names is left to the run."""
    if head.row.vectors:  # its vector terms compare sentence vectors, not layers
        return
    teacher = teacher_shape(SimpleNamespace(**model_cfg))
    for spec in cfg.students:
        shape = _student_shape(cfg, spec, teacher)
        if spec.family is not None or shape is None:
            continue
        for k, stage in enumerate(spec.stage_specs()):
            if not stage.objective.layerwise:
                continue
            layerwise = stage.objective.model_copy(update=dict.fromkeys(MLM_TERMS, 0.0))  # those need a tokenizer
            try:
                DistillObjective(layerwise, _config(shape), _config(teacher), False, None, head)
            except TinyplmError as exc:
                raise RecipeError(f"student {student_name(spec)}, stage {k}: {exc} (teacher {src}: "
                                  f"{teacher.layers} layers, {teacher.heads} heads, hidden {teacher.hidden}; "
                                  f"student: {shape.layers} layers, {shape.heads} heads, hidden {shape.hidden})"
                                  ) from None


def _student_shape(cfg: RunConfig, spec: StudentSpec, teacher: ShapeSpec) -> ShapeSpec | None:
    """The shape ``spec`` trains at: its ``shape``; the teacher's with as many layers as it copies;
    the teacher's, a named checkpoint's or an earlier student's when it starts from one; None when
    unknown (a damaged checkpoint is named by the checks that read it)."""
    if spec.shape is not None:
        return spec.shape
    if spec.teacher_layers:
        return teacher.model_copy(update={"layers": len(spec.teacher_layers)})
    if spec.init_from == "teacher":
        return teacher
    earlier = cfg.earlier_student(spec)
    if earlier is not None:
        return _student_shape(cfg, earlier, teacher)
    if spec.init_from:
        try:
            return teacher_shape(SimpleNamespace(**check_model_dir(resolve_model_dir(spec.init_from))))
        except TinyplmError:
            return None
    return None


def _config(shape: ShapeSpec) -> SimpleNamespace:
    """The config fields an objective reads, of ``shape``."""
    return SimpleNamespace(num_hidden_layers=shape.layers, num_attention_heads=shape.heads, hidden_size=shape.hidden)
