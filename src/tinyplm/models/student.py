"""Build a student from a shape, or from chosen teacher layers (DistilBERT-style init).

Students are ``transformers`` models of an architecture in :data:`ARCHS` (``bert`` by default,
``roberta``, ``deberta``: DeBERTa-v2's disentangled relative-position attention) with the task's
head (``...ForSequenceClassification``, ``...ForQuestionAnswering`` or
``...ForTokenClassification``, as the task teacher). Every student uses the teacher's tokenizer
(its vocabulary, padding id and token types); Hugging Face can represent every shape built here,
so each student saves and loads with the Auto classes.
"""

from __future__ import annotations

import torch
from transformers import (
    BertConfig,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    DebertaV2Config,
    PreTrainedModel,
    RobertaConfig,
)

from tinyplm.config.schema import ShapeSpec, StudentSpec
from tinyplm.errors import ModelError
from tinyplm.models import roles
from tinyplm.models.narrow import copy_narrowed_layers, keep_strongest_heads
from tinyplm.tasks.heads import Head, PerHead

#: The BERT class of each task head (other families: :func:`head_class`; the embedding head is the bare encoder).
HEAD_CLASSES: PerHead = PerHead("BERT class", {Head.SEQUENCE: BertForSequenceClassification,
                                               Head.SPAN: BertForQuestionAnswering,
                                               Head.TOKEN: BertForTokenClassification, Head.EMBEDDING: BertModel})
#: A student's architecture as a recipe names it -> its ``config.model_type`` (a role-table family).
ARCHS = {"bert": "bert", "roberta": "roberta", "deberta": "deberta-v2"}
#: DeBERTa-v3's attention settings (relative positions in 256 log buckets, content<->position terms,
#: position projections shared with the key/query ones, no absolute position table).
DEBERTA_ATTENTION = {"relative_attention": True, "pos_att_type": ["p2c", "c2p"], "position_buckets": 256,
                     "max_relative_positions": -1, "share_att_key": True, "norm_rel_ebd": "layer_norm",
                     "position_biased_input": False}


def model_type_of(arch: str) -> str:
    """The ``config.model_type`` of a recipe's ``arch`` (``bert``, ``roberta``, ``deberta``; a
    model_type of the role table is accepted too). Raises ``ModelError`` naming the valid ones."""
    if arch in ARCHS:
        return ARCHS[arch]
    if arch in roles.ROLES:
        return arch
    raise ModelError(f"unknown student arch {arch!r}; expected one of {', '.join(ARCHS)} or a model type of "
                     f"the role table ({', '.join(roles.ROLES)})")


def head_class(head: Head, model_type: str = "bert") -> type:
    """The ``transformers`` class of ``model_type`` with the task ``head``."""
    return roles.task_class(model_type, Head(head).row.class_suffix)


def head_of(model) -> Head:
    """The task head of a model, from its class and its config's ``architectures``."""
    return Head.of_architectures([type(model).__name__, *(getattr(model.config, "architectures", None) or [])])


def student_config(shape: ShapeSpec, teacher_cfg, labels_cfg=None, arch: str = "bert",
                   layers: list[int] | None = None):
    """A config of ``shape`` and architecture ``arch`` (see :data:`ARCHS`, or a role-table model
    type) with the labels of ``labels_cfg`` (default the teacher's).

    A student of the teacher's own family takes the teacher's whole config with the new shape
    (:func:`family_config`): every field that changes wiring (attention variants, shared keys,
    position kinds and buckets, layer groups, embedding size, activation) stays as the teacher has
    it, present or absent. A student of another family (:data:`ARCHS`) shares the teacher's
    vocabulary, padding id, token types and positions: RoBERTa counts positions from
    ``pad_token_id + 1``, so its table is that much longer; DeBERTa replaces absolute positions by
    :data:`DEBERTA_ATTENTION`. Raises ``ModelError`` for a family the teacher is not of and
    :data:`ARCHS` lacks."""
    labels_cfg = labels_cfg or teacher_cfg
    model_type = model_type_of(arch)
    if model_type == teacher_cfg.model_type or model_type not in ARCHS.values():
        return family_config(shape, teacher_cfg, labels_cfg, model_type, layers)
    pad = getattr(teacher_cfg, "pad_token_id", 0) or 0
    offset = pad + 1  # RoBERTa's positions run from pad + 1: a RoBERTa teacher's table has them already
    positions = teacher_cfg.max_position_embeddings - (offset if teacher_cfg.model_type == "roberta" else 0)
    common = dict(
        vocab_size=teacher_cfg.vocab_size,
        hidden_size=shape.hidden,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        intermediate_size=shape.ffn,
        max_position_embeddings=positions,
        type_vocab_size=getattr(teacher_cfg, "type_vocab_size", 2),
        pad_token_id=pad,
        hidden_act=getattr(teacher_cfg, "hidden_act", None) or getattr(teacher_cfg, "activation", "gelu"),
        layer_norm_eps=getattr(teacher_cfg, "layer_norm_eps", 1e-12),
        num_labels=labels_cfg.num_labels,
        id2label=dict(labels_cfg.id2label),
        label2id=dict(labels_cfg.label2id),
        problem_type=labels_cfg.problem_type,
    )
    if model_type == "deberta-v2":
        return DebertaV2Config(**common, **DEBERTA_ATTENTION)
    common["type_vocab_size"] = common["type_vocab_size"] or 2  # BERT's embeddings need a token-type table
    if model_type == "roberta":
        common["max_position_embeddings"] += offset
        return RobertaConfig(**common)
    return BertConfig(**common)


def family_config(shape: ShapeSpec, teacher_cfg, labels_cfg, model_type: str, layers: list[int] | None = None):
    """The teacher's config with ``shape`` (under the family's own size keys,
    :func:`~tinyplm.models.roles.shaped_config_values`) and the labels of ``labels_cfg``: every
    other setting (positions, embedding size, activation, attention variants) stays the teacher's.
    A grouped family (ALBERT) gets one group per layer; per-layer lists (ModernBERT's
    ``layer_types``) are those of the teacher's ``layers`` when given, else rebuilt from the
    config's pattern.

    Raises ``ModelError`` when the teacher is of another family."""
    if teacher_cfg.model_type != model_type:
        raise ModelError(f"a {model_type} student is built from a {model_type} teacher's config; this teacher is "
                         f"'{teacher_cfg.model_type}' (students of other families: {', '.join(ARCHS)})")
    family = roles.ROLES[model_type]
    values = roles.shaped_config_values(teacher_cfg, shape.layers, shape.hidden, shape.heads, shape.ffn)
    values = {k: v for k, v in values.items() if not k.startswith("tinyplm_")}
    values.update(num_labels=labels_cfg.num_labels, id2label=dict(labels_cfg.id2label),
                  label2id=dict(labels_cfg.label2id), problem_type=labels_cfg.problem_type)
    if family.group_key:
        values[family.group_key] = shape.layers
    for key in family.layer_lists:
        values[key] = roles.layer_lists(teacher_cfg, layers)[key] if layers else None
    return type(teacher_cfg).from_dict(values)


def teacher_shape(teacher_cfg) -> ShapeSpec:
    """The teacher's own shape (for students that only pick layers)."""
    c = roles.config_shape(teacher_cfg)
    return ShapeSpec(layers=c.layers, hidden=c.hidden, heads=c.heads, ffn=c.ffn)


def build_student(spec: StudentSpec, teacher: PreTrainedModel, seed: int = 42,
                  task_model: PreTrainedModel | None = None, arch: str | None = None,
                  word_embeddings: bool = False) -> PreTrainedModel:
    """:func:`build_encoder_student`, and for a teacher that is an embedding model
    (:class:`~tinyplm.models.sentence.SentenceEncoder`) an embedding student: a bare encoder built
    the same way from the teacher's encoder, pooled, projected and normalised as the teacher's layout
    says (its ``with_encoder``)."""
    laid_out = getattr(teacher, "with_encoder", None)  # a SentenceEncoder (which imports this module)
    if laid_out is not None:
        return laid_out(build_encoder_student(spec, teacher.encoder, seed, None, arch, word_embeddings, Head.EMBEDDING))
    return build_encoder_student(spec, teacher, seed, task_model, arch, word_embeddings)


def build_encoder_student(spec: StudentSpec, teacher: PreTrainedModel, seed: int = 42,
                          task_model: PreTrainedModel | None = None, arch: str | None = None,
                          word_embeddings: bool = False, head: Head | None = None) -> PreTrainedModel:
    """Build the student described by ``spec``, with the head (``head`` when given: a bare encoder
    for the embedding head) and labels of ``task_model`` (the task teacher; default ``teacher``), of
    architecture ``arch`` (default ``spec.arch`` where the
    recipe has it, else the teacher's family for a student of teacher layers, else ``bert``).

    With ``spec.teacher_layers`` the student copies the teacher's embeddings, the listed layers,
    pooler and classifier; that needs a student of the teacher's own architecture. A ``shape``
    narrower than the teacher (hidden and FFN no larger, the same number of heads) takes the most
    important channels of each (``models.narrow``, BERT only), and ``shape.keep_heads`` keeps each
    layer's strongest heads (:func:`~tinyplm.models.narrow.keep_strongest_heads`); other cases raise
    ``ModelError``.
    Without it the student is randomly initialised (seeded): a RoBERTa or DeBERTa student of a BERT
    teacher starts from scratch, sharing only the tokenizer. ``word_embeddings`` starts such a
    student from the teacher's word table instead (:func:`init_word_embeddings`), the same init
    for every architecture.
    """
    task_model = task_model if task_model is not None else teacher
    tcfg = teacher.config
    layers = spec.teacher_layers
    named = arch or getattr(spec, "arch", None)
    model_type = model_type_of(named) if named else tcfg.model_type if layers else "bert"
    shape = spec.shape
    if layers:
        base = teacher_shape(tcfg)
        shape = shape or ShapeSpec(layers=len(layers), hidden=base.hidden, heads=base.heads, ffn=base.ffn)
        check_layer_init(shape, base, layers, tcfg.model_type, model_type)
    assert shape is not None  # guaranteed by StudentSpec validation
    torch.manual_seed(seed)
    config = student_config(shape, tcfg, task_model.config, model_type, layers)
    student = head_class(head or head_of(task_model), model_type)(config)
    if layers and (shape.hidden, shape.ffn) == (base.hidden, base.ffn):
        copy_teacher_layers(student, teacher, layers)
    elif layers:
        copy_narrowed_layers(student, teacher, layers)
    elif word_embeddings:
        init_word_embeddings(student, teacher)
    if layers and shape.keep_heads is not None and shape.keep_heads < shape.heads:
        keep_strongest_heads(student, shape.keep_heads)
    return student


def check_layer_init(shape: ShapeSpec, base: ShapeSpec, layers: list[int], teacher_type: str,
                     student_type: str = "bert") -> None:
    """Raise ``ModelError`` when a student of ``shape`` and ``student_type`` cannot start from the
    teacher ``layers`` of a ``teacher_type`` teacher of shape ``base`` (another family, a layer out of
    range, more heads or wider than the teacher); run before the teacher is trained (preflight)."""
    if student_type not in roles.ROLES:
        raise ModelError(f"teacher_layers init copies layers of a family in the role table ({', '.join(roles.ROLES)});"
                         f" this one is '{student_type}' (drop teacher_layers, or use a checkpoint of those families)")
    if teacher_type != student_type:
        raise ModelError(f"teacher_layers init copies layers of the student's own architecture: this teacher is "
                         f"'{teacher_type}', the student '{student_type}' (drop teacher_layers to start from scratch)")
    narrower = (shape.hidden, shape.ffn) != (base.hidden, base.ffn)
    if narrower:
        roles.require(student_type, roles.Stage.NARROW, f"teacher_layers init of a narrower student (hidden "
                      f"{shape.hidden}, ffn {shape.ffn} < the teacher's {base.hidden}, {base.ffn})")
    first = roles.ROLES[student_type].first_layer
    if first and layers and layers[0] != 0:
        raise ModelError(f"teacher_layers {layers} cannot start with layer {layers[0]}: {first}")
    bad = [i for i in layers if not 0 <= i < base.layers]
    if bad:
        raise ModelError(f"teacher_layers {bad} out of range: the teacher has layers 0..{base.layers - 1}")
    if shape.heads != base.heads or shape.hidden > base.hidden or shape.ffn > base.ffn:
        raise ModelError(
            f"teacher_layers init needs the teacher's head count ({base.heads}) and widths no larger than "
            f"the teacher's (hidden {base.hidden}, ffn {base.ffn}); the student shape has hidden "
            f"{shape.hidden}, heads {shape.heads}, ffn {shape.ffn}"
            + (f" (fewer heads of the teacher's width: heads {base.heads} with shape.keep_heads "
               f"{shape.heads})" if shape.heads < base.heads else "")
        )


@torch.no_grad()
def init_word_embeddings(student: PreTrainedModel, teacher: PreTrainedModel) -> int:
    """Start the student's word table from the teacher's: copied when the widths match, else its
    projection on the teacher table's top principal directions (``torch.linalg.svd`` of the
    centred V x H table; the student's embedding LayerNorm absorbs the scale). Works across
    families (only the vocabulary must match). Returns the variance share kept (1.0 for a copy).

    Raises ``ModelError`` when the vocabularies differ or the student is wider than the teacher."""
    src, dst = roles.word_embeddings(teacher).weight, roles.word_embeddings(student).weight
    (v_t, h_t), (v_s, h_s) = src.shape, dst.shape
    if v_t != v_s or h_s > h_t:
        raise ModelError(f"word-embedding init needs the teacher's vocabulary ({v_t}) and a width no larger "
                         f"than its {h_t}; the student has {v_s} x {h_s}")
    if h_s == h_t:
        dst.copy_(src)
        return 1.0
    centred = src.float() - src.float().mean(0)
    _, sv, vh = torch.linalg.svd(centred, full_matrices=False)  # vh (H_t, H_t), rows by variance
    dst.copy_((centred @ vh[:h_s].T).to(dst.dtype))  # (V, H_s)
    return float((sv[:h_s] ** 2).sum() / (sv ** 2).sum())


@torch.no_grad()
def copy_teacher_layers(student: PreTrainedModel, teacher: PreTrainedModel, layers: list[int]) -> None:
    """Copy embeddings, the chosen encoder layers, pooler and task head from teacher to student.

    ``teacher`` may be a classifier, a masked-LM or a bare encoder of the student's family; what it
    lacks (pooler, classifier) stays as initialised."""
    roles.embeddings(student).load_state_dict(roles.embeddings(teacher).state_dict())
    src, dst = roles.layers(teacher), roles.layers(student)
    for s_idx, t_idx in enumerate(layers):
        dst[s_idx].load_state_dict(src[t_idx].state_dict())
    family = roles.roles_of(student)
    placed = tuple(f"{p}." for p in (family.embeddings, family.layers, family.pooler) if p)
    rest = {k: v for k, v in roles.base_model(teacher).state_dict().items() if not k.startswith(placed)}
    roles.base_model(student).load_state_dict(rest, strict=False)  # DeBERTa: relative-position table, its norm
    pooled, mine = roles.pooler(teacher), roles.pooler(student)
    if pooled is not None and mine is not None:
        mine.load_state_dict(pooled.state_dict())
    heads = roles.task_heads(student)
    for name, head in roles.task_heads(teacher).items():
        mine = heads.get(name)
        if mine is not None and _shapes(head) == _shapes(mine):  # same labels (RoBERTa's head is two Linears)
            mine.load_state_dict(head.state_dict())


def _shapes(module: torch.nn.Module) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}


def shape_of(model) -> dict:
    """A model's encoder shape as recorded in reports: layers, hidden, heads, ffn; a pruned model
    also has ``heads_per_layer`` and ``ffn_per_layer`` (and ``heads``/``ffn`` are their maxima)."""
    from tinyplm.models.shape import SHAPE_KEY, hf_representable, layer_shape

    c = roles.config_shape(model.config)
    shape = {"layers": c.layers, "hidden": c.hidden, "heads": c.heads, "ffn": c.ffn}
    if roles.is_encoder(model):
        per = layer_shape(model)
        representable = hf_representable(model)
    else:  # an exported model: the per-layer shape its config records (ONNX, OpenVINO), if pruned
        recorded = getattr(model.config, SHAPE_KEY, None) or {}
        if not (recorded.get("heads") and recorded.get("ffn")):
            return shape
        per = {"heads": recorded["heads"], "ffn": recorded["ffn"]}
        representable = set(per["heads"]) == {c.heads} and len(set(per["ffn"])) == 1
    shape["ffn"] = max(per["ffn"])
    if not representable:
        shape.update(heads=max(per["heads"]), heads_per_layer=list(per["heads"]), ffn_per_layer=list(per["ffn"]))
    return shape
