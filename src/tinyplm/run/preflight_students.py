"""Preflight checks of each transformer student against its teacher: the family it will be, the
steps and terms that family cannot take, and the shape the teacher's layers can give it. Each
raises before any work runs (:func:`tinyplm.run.preflight.preflight` calls them)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tinyplm.config.compress import step_name
from tinyplm.config.schema import RunConfig, StudentSpec, student_name
from tinyplm.errors import ModelError, RecipeError
from tinyplm.models import check_model_dir, resolve_model_dir, roles
from tinyplm.models.narrow import projection_problem
from tinyplm.models.roles import ROLES
from tinyplm.models.student import ARCHS, check_layer_init, model_type_of, teacher_shape

#: Objective terms computed from attention scores or probabilities (``models.features``): a family
#: whose scores are not recomputed from Q and K (the role table's ATTENTION_FEATURES) cannot give them.
ATTENTION_TERMS = ("attention_scores", "attention_kl")


def student_model_type(cfg: RunConfig, spec: StudentSpec, teacher_type: str) -> str | None:
    """The ``config.model_type`` a transformer student will have (None for a classic student):
    the teacher's for ``teacher_layers`` (unless ``arch`` says otherwise) or ``init_from: teacher``,
    an earlier student's, a checkpoint's, or ``arch`` (default bert) for a student of ``shape``."""
    if spec.family is not None:
        return None
    if spec.init_from == "teacher" or (spec.teacher_layers and spec.arch is None):
        return teacher_type
    earlier = cfg.earlier_student(spec) if spec.init_from else None
    if earlier is not None:
        return student_model_type(cfg, earlier, teacher_type)
    if spec.init_from:
        return str(check_model_dir(resolve_model_dir(spec.init_from))["model_type"])
    return model_type_of(spec.arch or "bert")


def check_student_families(cfg: RunConfig, teacher_type: str) -> None:
    """A compress step, a head count kept from the start or a training term a student's encoder
    family cannot take (the role table's ``cannot``: MPNet's per-layer head pruning, ModernBERT's
    attention-score features) is refused before anything runs, naming the student, the step and why."""
    for spec in cfg.students:
        model_type = student_model_type(cfg, spec, teacher_type)
        if model_type is None or model_type not in ROLES:
            continue
        name = student_name(spec)
        if spec.arch is not None and not spec.init_from and model_type != teacher_type and \
                model_type not in ARCHS.values():  # models.student.student_config builds it from the teacher's config
            raise RecipeError(f"student {name}: arch {spec.arch} builds a {model_type} student from a {model_type} "
                              f"teacher's config, and this teacher is '{teacher_type}'; a student of another family "
                              f"than its teacher is one of: {', '.join(ARCHS)}")
        if spec.shape is not None and spec.shape.keep_heads is not None:
            roles.require(model_type, roles.Stage.PRUNE_HEADS, f"student {name}: shape.keep_heads")
        for step in spec.compress:
            if step.kind == "prune_heads":
                roles.require(model_type, roles.Stage.PRUNE_HEADS, f"student {name}: compress step {step_name(step)}")
        trained = [st.objective for st in spec.stage_specs()]
        trained += [c.recover.objective for c in spec.compress if c.recover is not None]
        terms = sorted({t for o in trained for t in ATTENTION_TERMS if getattr(o, t) > 0})
        for who in dict.fromkeys((model_type, teacher_type)) if terms else ():
            if who in ROLES:
                roles.require(who, roles.Stage.ATTENTION_FEATURES,
                              f"student {name}: distilling attention scores ({', '.join(terms)})")


def check_layer_shapes(cfg: RunConfig, model_cfg: dict, src: Path) -> None:
    """A student of ``teacher_layers`` whose shape the teacher's layers cannot give (more heads, wider,
    a layer out of range) is refused here, not after the teacher's fine-tune has run."""
    for spec in cfg.students:
        if spec.family is not None or not spec.teacher_layers:
            continue
        layers = spec.teacher_layers
        student_type = model_type_of(spec.arch) if spec.arch else model_cfg["model_type"]
        try:
            base = teacher_shape(SimpleNamespace(**model_cfg))
            shape = spec.shape or base.model_copy(update={"layers": len(layers)})
            check_layer_init(shape, base, layers, model_cfg["model_type"], student_type)
            problem = projection_problem(model_cfg, shape.hidden, shape.heads)
            if problem:
                raise ModelError(problem)
        except ModelError as exc:
            raise RecipeError(f"student {student_name(spec)}: {exc} (teacher {src})") from None

