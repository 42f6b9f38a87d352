"""Build a student from a shape, or from chosen teacher layers (DistilBERT-style init).

Students are ``transformers`` BERT models with the task's head (``BertForSequenceClassification``,
``BertForQuestionAnswering`` or ``BertForTokenClassification``, as the task teacher): Hugging Face
can represent every shape built here, so each student saves and loads with the Auto classes.
"""

from __future__ import annotations

import torch
from transformers import (
    BertConfig,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    PreTrainedModel,
)

from tinyplm.config.schema import ShapeSpec, StudentSpec
from tinyplm.errors import ModelError
from tinyplm.models import roles
from tinyplm.models.narrow import copy_narrowed_layers
from tinyplm.tasks.heads import Head

#: The BERT class of each task head.
HEAD_CLASSES = {Head.SEQUENCE: BertForSequenceClassification, Head.SPAN: BertForQuestionAnswering,
                Head.TOKEN: BertForTokenClassification}


def head_of(model) -> Head:
    """The task head of a model, from its class and its config's ``architectures``."""
    return Head.of_architectures([type(model).__name__, *(getattr(model.config, "architectures", None) or [])])


def student_config(shape: ShapeSpec, teacher_cfg, labels_cfg=None) -> BertConfig:
    """A BertConfig of ``shape`` that shares the teacher's vocabulary and positions, and the labels
    of ``labels_cfg`` (default the teacher's)."""
    labels_cfg = labels_cfg or teacher_cfg
    return BertConfig(
        vocab_size=teacher_cfg.vocab_size,
        hidden_size=shape.hidden,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        intermediate_size=shape.ffn,
        max_position_embeddings=teacher_cfg.max_position_embeddings,
        type_vocab_size=getattr(teacher_cfg, "type_vocab_size", 2),
        pad_token_id=getattr(teacher_cfg, "pad_token_id", 0) or 0,
        hidden_act=getattr(teacher_cfg, "hidden_act", "gelu"),
        layer_norm_eps=getattr(teacher_cfg, "layer_norm_eps", 1e-12),
        num_labels=labels_cfg.num_labels,
        id2label=dict(labels_cfg.id2label),
        label2id=dict(labels_cfg.label2id),
        problem_type=labels_cfg.problem_type,
    )


def teacher_shape(teacher_cfg) -> ShapeSpec:
    """The teacher's own shape (for students that only pick layers)."""
    return ShapeSpec(
        layers=teacher_cfg.num_hidden_layers,
        hidden=teacher_cfg.hidden_size,
        heads=teacher_cfg.num_attention_heads,
        ffn=teacher_cfg.intermediate_size,
    )


def build_student(spec: StudentSpec, teacher: PreTrainedModel, seed: int = 42,
                  task_model: PreTrainedModel | None = None) -> PreTrainedModel:
    """Build the student described by ``spec``, with the head and labels of ``task_model`` (the
    task teacher; default ``teacher``).

    With ``spec.teacher_layers`` the student copies the teacher's embeddings, the listed layers,
    pooler and classifier. A ``shape`` narrower than the teacher (hidden and FFN no larger, the
    same number of heads) takes the most important channels of each (``models.narrow``); other
    shapes raise ``ModelError``. Without it the student is randomly initialised (seeded).
    """
    task_model = task_model if task_model is not None else teacher
    tcfg = teacher.config
    layers = spec.teacher_layers
    shape = spec.shape
    if layers:
        base = teacher_shape(tcfg)
        shape = shape or ShapeSpec(layers=len(layers), hidden=base.hidden, heads=base.heads, ffn=base.ffn)
        _check_layer_init(shape, base, layers, tcfg.model_type)
    assert shape is not None  # guaranteed by StudentSpec validation
    torch.manual_seed(seed)
    student = HEAD_CLASSES[head_of(task_model)](student_config(shape, tcfg, task_model.config))
    if layers and (shape.hidden, shape.ffn) == (base.hidden, base.ffn):
        copy_teacher_layers(student, teacher, layers)
    elif layers:
        copy_narrowed_layers(student, teacher, layers)
    return student


def _check_layer_init(shape: ShapeSpec, base: ShapeSpec, layers: list[int], model_type: str) -> None:
    if model_type != "bert":
        raise ModelError(f"teacher_layers init needs a BERT teacher; this teacher is '{model_type}'")
    bad = [i for i in layers if not 0 <= i < base.layers]
    if bad:
        raise ModelError(f"teacher_layers {bad} out of range: the teacher has layers 0..{base.layers - 1}")
    if shape.heads != base.heads or shape.hidden > base.hidden or shape.ffn > base.ffn:
        raise ModelError(
            f"teacher_layers init needs the teacher's head count ({base.heads}) and widths no larger than "
            f"the teacher's (hidden {base.hidden}, ffn {base.ffn}); the student shape has hidden "
            f"{shape.hidden}, heads {shape.heads}, ffn {shape.ffn}"
        )


@torch.no_grad()
def copy_teacher_layers(student: PreTrainedModel, teacher: PreTrainedModel, layers: list[int]) -> None:
    """Copy embeddings, the chosen encoder layers, pooler and task head from teacher to student.

    ``teacher`` may be a classifier, a ``BertForMaskedLM`` or a bare ``BertModel``; what it lacks
    (pooler, classifier) stays as initialised."""
    roles.embeddings(student).load_state_dict(roles.embeddings(teacher).state_dict())
    src, dst = roles.layers(teacher), roles.layers(student)
    for s_idx, t_idx in enumerate(layers):
        dst[s_idx].load_state_dict(src[t_idx].state_dict())
    pooled, mine = roles.pooler(teacher), roles.pooler(student)
    if pooled is not None and mine is not None:
        mine.load_state_dict(pooled.state_dict())
    heads = roles.task_heads(student)
    for name, head in roles.task_heads(teacher).items():
        mine = heads.get(name)
        if mine is not None and head.weight.shape == mine.weight.shape:
            mine.load_state_dict(head.state_dict())


def shape_of(model) -> dict:
    """A model's encoder shape as recorded in reports: layers, hidden, heads, ffn; a pruned model
    also has ``heads_per_layer`` and ``ffn_per_layer`` (and ``heads``/``ffn`` are their maxima)."""
    from tinyplm.models.shape import hf_representable, layer_shape

    c = model.config
    shape = {"layers": c.num_hidden_layers, "hidden": c.hidden_size, "heads": c.num_attention_heads,
             "ffn": c.intermediate_size}
    if roles.is_encoder(model):
        per = layer_shape(model)
        shape["ffn"] = max(per["ffn"])
        if not hf_representable(model):
            shape.update(heads=max(per["heads"]), heads_per_layer=per["heads"], ffn_per_layer=per["ffn"])
    return shape
