"""Each student's distillation objective checked against its shape and the teacher's before any work.

The layer-wise terms compare a student's layers, heads and widths with the teacher's: attention maps
one to one need as many heads, a ``layer_map`` must name layers both have, ``relation_heads`` must
divide both widths. :class:`~tinyplm.distill.objective.DistillObjective` refuses such a recipe when
it is built, which a run does only after the teacher's fine-tune. :func:`check_objectives` builds each
trained stage's objective here, on the shapes alone (no weights), so validate and run refuse the
recipe first, naming the student and stage. A stage whose method trains the task head alone or first
(``frozen``, ``ulmfit``) needs a term that reads the head, checked here too.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tinyplm.config.base import LAYERWISE_TERMS, MLM_TERMS, ObjectiveSpec
from tinyplm.config.finetune import Method
from tinyplm.config.schema import RunConfig, ShapeSpec, StageSpec, StudentSpec, TrainSpec, student_name
from tinyplm.distill.objective import DistillObjective
from tinyplm.errors import RecipeError, TinyplmError
from tinyplm.models import check_model_dir, resolve_model_dir, roles
from tinyplm.models.shape import SHAPE_KEY
from tinyplm.models.student import teacher_shape
from tinyplm.run.preflight_embedding import trained_objectives
from tinyplm.run.preflight_students import student_model_type
from tinyplm.tasks.heads import Head
from tinyplm.train.methods import split_module_problem


def check_objectives(cfg: RunConfig, model_cfg: dict, src: Path, head: Head) -> None:
    """Build every layer-wise stage objective of every transformer student against its stage's
    teacher's shape (the run's teacher, ``model_cfg`` its config.json, for ``finetuned`` and
    ``base``; the named dir's otherwise) and the student's; raises ``RecipeError`` naming the
    student and stage (and the teacher) for what the objective refuses. A shape that cannot be
    known from the recipe and the checkpoints it names is left to the run (and a damaged
    checkpoint to the checks that read it)."""
    _check_targets(cfg, model_cfg)
    if head.row.vectors:  # its vector terms compare sentence vectors, not layers
        return
    main = teacher_shape(SimpleNamespace(**model_cfg))
    for spec in cfg.students:
        if spec.family is not None:
            continue
        shape = _student_shape(cfg, spec, main)
        _check_methods(spec, shape, main)
        for k, stage in enumerate(spec.stage_specs()):
            teacher = _teacher_of(stage.teacher, main)
            if shape is None or teacher is None or not stage.objective.layerwise:
                continue
            layerwise = stage.objective.model_copy(update=dict.fromkeys(MLM_TERMS, 0.0))  # those need a tokenizer
            try:
                DistillObjective(layerwise, _config(shape), _config(teacher), False, None, head)
            except TinyplmError as exc:
                who = src if stage.teacher in ("finetuned", "base") else stage.teacher
                kept = f" keeping {shape.keep_heads}" if shape.keep_heads is not None else ""
                raise RecipeError(f"student {student_name(spec)}, stage {k}: {exc} (teacher {who}: "
                                  f"{teacher.layers} layers, {teacher.heads} heads, hidden {teacher.hidden}; "
                                  f"student: {shape.layers} layers, {shape.heads} heads{kept}, hidden {shape.hidden})"
                                  ) from None


#: Terms that read the task head's outputs (the logits).
HEAD_TERMS = ("kd_weight", "hard_weight", "logit_mse")
#: Methods whose first steps train only the task head (and, for ulmfit, what sits above the layers:
#: a masked-LM head, the objective's projections), with the terms that reach it.
HEAD_FIRST = {Method.FROZEN: HEAD_TERMS, Method.ULMFIT: (*HEAD_TERMS, *MLM_TERMS)}


#: Layer-wise terms that learn a projection where the two widths differ (TinyBERT's W_h): trainable
#: from a ULMFiT stage's first step, while its layers are still frozen.
PROJECTED_TERMS = ("embedding", "hidden", "cosine")


def _projection_trains(stage, shape: ShapeSpec | None, main: ShapeSpec) -> bool:
    """True when a ULMFiT ``stage``'s first steps may train a projection (or the widths are not known here)."""
    teacher = _teacher_of(stage.teacher, main)
    if shape is None or teacher is None:
        return True
    return shape.hidden != teacher.hidden and any(getattr(stage.objective, t) > 0 for t in PROJECTED_TERMS)


def _check_methods(spec: StudentSpec, shape: ShapeSpec | None, main: ShapeSpec) -> None:
    """Raise ``RecipeError`` for a stage whose method trains the task head alone (``frozen``) or
    first (``ulmfit``) while its objective never reads that head (layer-wise terms only): its loss
    would not reach a weight that trains, which the loop finds only at its first step, after the
    teacher's fine-tune. A ULMFiT stage whose terms learn a projection (``shape``'s width not the
    teacher's) trains it first, then the layers as they unfreeze: let through."""
    for where, stage in trained_objectives(spec):
        reads = HEAD_FIRST.get(stage.train.method)
        if stage.train.method is Method.ULMFIT and _projection_trains(stage, shape, main):
            continue
        if reads is not None and not any(getattr(stage.objective, t) > 0 for t in reads):
            terms = [t for t in LAYERWISE_TERMS if getattr(stage.objective, t) > 0]
            raise RecipeError(
                f"student {student_name(spec)}, {where}: method {stage.train.method.value} trains the task head "
                f"{'alone' if stage.train.method is Method.FROZEN else 'first'}, but its objective "
                f"({', '.join(terms)}) never reads it, so it would train nothing of the student; use method full "
                f"(or lora, bitfit) there, or give it one of {', '.join(reads)} > 0")


def _check_targets(cfg: RunConfig, model_cfg: dict) -> None:
    """Raise ``RecipeError`` for adapter settings the model they adapt cannot take: ``targets``
    naming part of a fused Linear of its family (``train.methods.split_module_problem``), a LoRA
    rank ``r`` not below its hidden size. Checked in the teacher's fine-tune and in every section
    that trains a transformer student (its stages, its compress steps' recovery), each against the
    model it trains: the teacher, the teacher's layers, an earlier student, a checkpoint it starts
    from, its own ``arch`` and ``shape``. A family outside the role table is the model checks' to
    report."""
    teacher_type = model_cfg.get("model_type")
    try:
        main = teacher_shape(SimpleNamespace(**model_cfg))
    except TinyplmError:
        return  # a config the shape checks report
    sections = [("teacher.finetune", cfg.teacher.finetune, "the teacher's", teacher_type, main.hidden)]
    for i, spec in enumerate(cfg.students):
        shape = _student_shape(cfg, spec, main)
        model_type = student_model_type(cfg, spec, teacher_type)
        sections += [(f"students.{i}.{where}", train, f"student {student_name(spec)}'s", model_type,
                      shape.hidden if shape else None) for where, train in _trained_by_place(spec)]
    for place, train, whose, model_type, width in sections:
        if train is None or model_type not in roles.ROLES:
            continue
        table = roles.by_type(model_type, whose)
        targets = train.method_options.targets
        problem = targets and split_module_problem(table.model_type, table.linears, targets)
        if problem:
            raise RecipeError(f"{place}.method_options.targets: {problem}")
        r = train.method_options.r if train.method is Method.LORA else 0
        if isinstance(width, int) and r >= width:  # every target role has a side this wide
            raise RecipeError(f"{place}.method_options.r = {r} is not below {whose} hidden size {width}: a rank-{r} "
                              f"update of its Linear layers is full rank with more parameters than the layers; use "
                              f"r < {width}, or method full")


def _trained_by_place(spec: StudentSpec) -> list[tuple[str, TrainSpec]]:
    """Each training section of ``spec`` with its place under the student (``train``,
    ``stages.1.train``, ``compress.0.recover.train``)."""
    return [(where, train) for where, train, _ in _sections_by_place(spec)]


def _sections_by_place(spec: StudentSpec) -> list[tuple[str, TrainSpec, ObjectiveSpec]]:
    """Each (training section, objective) of ``spec`` with the place of the training section."""
    out = [(where or "train", stage.train, stage.objective) for where, stage in _stages_by_place(spec)]
    return out + [(f"compress.{j}.recover.train", step.recover.train, step.recover.objective)
                  for j, step in enumerate(spec.compress) if step.recover is not None]


def temperature_notes(cfg: RunConfig, is_regression: bool) -> tuple[str, ...]:
    """A soft-target term (``kd_weight`` on a classification task, ``mlm_soft``) at a temperature
    below 1, said before the run: it sharpens the teacher's distribution towards its top class, and
    the T^2 scale (:mod:`tinyplm.train.kd`) leaves the term's gradients about T times their size
    at T = 1, so the student learns little of what the teacher says of the other classes. No error:
    a sharpened target is a choice, but rarely the one meant."""
    notes = []
    for spec in cfg.students:
        for where, _, objective in _sections_by_place(spec):
            soft = [t for t, on in (("kd_weight", objective.kd_weight > 0 and not is_regression),
                                    ("mlm_soft", objective.mlm_soft > 0)) if on]
            if soft and objective.temperature < 1:
                place = where.removesuffix(".train").removesuffix("train").rstrip(".")
                notes.append(f"student {student_name(spec)}{', ' + place if place else ''}: objective.temperature "
                             f"{objective.temperature:g} is below 1: {' and '.join(soft)} then sharpen the teacher's "
                             "distribution towards its top class, and the T^2 scale leaves their gradients about "
                             f"{objective.temperature:g} times their size at 1, so the student learns little of the "
                             "teacher's other classes; distillation usually uses 1 or more")
    return tuple(notes)


def _stages_by_place(spec: StudentSpec) -> list[tuple[str | None, StageSpec]]:
    """Each stage of ``spec`` with its place under the student (``stages.1.train``; None: ``train``)."""
    if spec.stages is None:
        return [(None, spec.stage_specs()[0])]
    return [(f"stages.{k}.train", stage) for k, stage in enumerate(spec.stages)]


def _teacher_of(name: str, main: ShapeSpec) -> ShapeSpec | None:
    """The shape of a stage's teacher: the run's (``finetuned``, ``base``: one shape) or the named
    dir's; None when it cannot be read here."""
    if name in ("finetuned", "base"):
        return main
    return _shape_of_dir(name)


def _shape_of_dir(name: str) -> ShapeSpec | None:
    try:
        return teacher_shape(SimpleNamespace(**check_model_dir(resolve_model_dir(name))))
    except TinyplmError:
        return None


def _student_shape(cfg: RunConfig, spec: StudentSpec, main: ShapeSpec) -> ShapeSpec | None:
    """The shape ``spec`` trains at: its ``shape``; the shape of the teacher it copies layers from
    (its first stage's) with as many layers as it copies; the run's teacher's (``init_from:
    teacher``), an earlier student's or a named checkpoint's when it starts from one; None when
    unknown."""
    if spec.shape is not None:
        return spec.shape
    if spec.teacher_layers:
        stages = spec.stage_specs()
        source = _teacher_of(stages[0].teacher, main) if stages else main
        return source.model_copy(update={"layers": len(spec.teacher_layers)}) if source else None
    if spec.init_from == "teacher":
        return main
    earlier = cfg.earlier_student(spec)
    if earlier is not None:
        return _student_shape(cfg, earlier, main)
    return _shape_of_dir(spec.init_from) if spec.init_from else None


def _config(shape: ShapeSpec) -> SimpleNamespace:
    """The config fields an objective reads, of ``shape``: with ``keep_heads``, that many heads in
    every layer, each as wide as one of ``heads`` (as the student built from it records them)."""
    config = SimpleNamespace(num_hidden_layers=shape.layers, num_attention_heads=shape.heads, hidden_size=shape.hidden)
    if shape.keep_heads is not None:
        setattr(config, SHAPE_KEY, {"heads": [shape.keep_heads] * shape.layers})
    return config
