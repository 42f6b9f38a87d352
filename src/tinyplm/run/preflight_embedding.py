"""The checks of a run's preflight that tell the embedding task from the classifier tasks: which
objective terms each head trains, and what an embedding run's teacher and students must be. Run by
:func:`tinyplm.run.preflight.preflight`, before anything is written."""

from __future__ import annotations

from pathlib import Path

from tinyplm.config.compress import step_name
from tinyplm.config.schema import (
    LAYERWISE_TERMS,
    MLM_TERMS,
    VECTOR_TERMS,
    RunConfig,
    StageSpec,
    StudentSpec,
    student_name,
)
from tinyplm.errors import ModelError, RecipeError
from tinyplm.models import resolve_model_dir
from tinyplm.models.pooling import read_layout
from tinyplm.tasks.base import TaskData
from tinyplm.tasks.heads import Head, Loss


def trained_objectives(spec: StudentSpec) -> list[tuple[str, StageSpec]]:
    """Every training of ``spec`` as (where, the stage it is): its stages and its compress steps'
    recoveries (each a stage learning from the fine-tuned teacher, with the recovery's train section)."""
    out = [(f"stage {k}", st) for k, st in enumerate(spec.stage_specs())]
    out += [(f"the recovery of compress step {step_name(c)}",
             StageSpec(data=c.recover.data, objective=c.recover.objective, train=c.recover.train))
            for c in spec.compress if c.recover is not None]
    return out


def check_vector_terms(cfg: RunConfig, data: TaskData, teacher_dir: Path) -> None:
    """The embedding task (a head whose loss is on vectors) and the classifier tasks train different
    terms: refuse, naming the student and stage, a term the task's head cannot train, an embedding
    teacher that is not a sentence-embedding model or that the recipe asks to fine-tune, and a
    transformer student started from a dir without a sentence-embedding layout. Found here, before
    the teacher's vectors are computed."""
    vectors = Head(data.head).row.loss is Loss.VECTORS
    transformers = [s for s in cfg.students if s.family is None]
    if not vectors:
        for spec in transformers:
            for where, st in trained_objectives(spec):
                if st.objective.vectors:
                    raise RecipeError(f"student {student_name(spec)}, {where}: {', '.join(VECTOR_TERMS)} are the "
                                      f"embedding task's terms; task '{data.task}' has a {data.head} head")
        return
    if read_layout(teacher_dir) is None:
        raise ModelError(f"{teacher_dir}: the embedding task distils a sentence-embedding model (a sentence-"
                         "transformers folder: modules.json with a Pooling module); this dir has none")
    if cfg.teacher.finetune is not None:
        raise RecipeError("teacher.finetune: the embedding task's teacher is used as it is (its vectors are the "
                          "targets); drop teacher.finetune")
    for spec in transformers:
        name = student_name(spec)
        for where, st in trained_objectives(spec):
            o = st.objective
            wrong = [t for t in ("hard_weight", "logit_mse", *LAYERWISE_TERMS, *MLM_TERMS) if getattr(o, t) > 0]
            wrong += ["kd_weight"] if "kd_weight" in o.model_fields_set and o.kd_weight > 0 else []
            if wrong or not o.vectors:
                what = f"has {', '.join(wrong)}" if wrong else "has no vector term"
                raise RecipeError(f"student {name}, {where}: {what}; an embedding student learns the teacher's "
                                  f"vectors: give {', '.join(VECTOR_TERMS)} (one or more > 0) and no other term")
            if st.data != "task" or st.teacher != "finetuned":
                raise RecipeError(f"student {name}, {where}: data '{st.data}', teacher '{st.teacher}'; an embedding "
                                  "student trains on the task's texts (task.train_texts) against the run's teacher")
        init = spec.init_from
        if init and init != "teacher" and cfg.earlier_student(spec) is None and \
                read_layout(resolve_model_dir(init)) is None:
            raise ModelError(f"student {name}: init_from {init}: not a sentence-embedding model (no modules.json "
                             "with a Pooling module); an embedding student starts from one")
