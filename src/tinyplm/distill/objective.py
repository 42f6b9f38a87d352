"""A stage's objective: the recipe's weighted loss terms, with the learned projections they need.

``build_objective(spec, student_cfg, teacher_cfg, is_regression)`` returns a
:class:`DistillObjective`: an ``nn.Module`` (its projections train and checkpoint with the
student) and a training :class:`~tinyplm.train.objective.Objective`. It knows which features it
needs from each model, runs both through :func:`~tinyplm.models.features.forward_features` (or
:func:`~tinyplm.distill.mlm.mlm_forward` for masked-LM terms) and weighs the terms in
:meth:`DistillObjective.terms`. The terms themselves are pure functions (``kd``, ``losses``,
``intermediate``, ``mlm``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from tinyplm.config.schema import LAYERWISE_TERMS, ObjectiveSpec
from tinyplm.distill import intermediate as im
from tinyplm.distill.aligned_pieces import TeacherPieces, on_student_positions
from tinyplm.distill.matching import LayerMap, resolve
from tinyplm.distill.mlm import is_masked_lm, mlm_forward, mlm_hard_loss, mlm_soft_kd
from tinyplm.errors import RecipeError
from tinyplm.models.features import Features, forward_features
from tinyplm.models.narrow import TEACHER_CHANNELS
from tinyplm.models.shape import config_heads, with_layer_shape
from tinyplm.tasks.encoding import collate, model_inputs
from tinyplm.tasks.heads import Head, PerHead
from tinyplm.train.masking import Masking, mask_tokens
from tinyplm.train.objective import Batch, supervised_batch
from tinyplm.train.prediction import PredictionObjective

_NEEDS = {
    "embedding": {"embeddings"},
    "hidden": {"hidden"},
    "cosine": {"hidden"},
    "attention_scores": {"attn_scores"},
    "attention_kl": {"attn_probs"},
    "value_relation": {"values"},
    "qkv_relation": {"queries", "keys", "values"},
}


class DistillObjective(nn.Module):
    """Weighted sum of prediction-layer KD, hard labels, layer-wise and masked-LM terms (see ObjectiveSpec).

    With masked-LM terms (``masking`` set) :meth:`prepare` masks each batch (:meth:`mask`), both
    models run through :func:`~tinyplm.distill.mlm.mlm_forward`, and the batch's targets are the
    masked-LM labels ``(batch, seq)``.
    """

    def __init__(self, spec: ObjectiveSpec, student_cfg, teacher_cfg, is_regression: bool,
                 masking: Masking | None = None, head: Head = Head.SEQUENCE,
                 class_weights: tuple[float, ...] | None = None) -> None:
        super().__init__()
        self.spec = spec
        if spec.masked_lm and masking is None:
            raise ValueError("mlm_soft/mlm_hard need a Masking (the tokenizer's [MASK] and special ids)")
        self.masking = masking if spec.masked_lm else None
        self.prediction = PredictionObjective(spec.kd_weight, spec.hard_weight, spec.temperature, is_regression, head,
                                              spec.logit_mse, class_weights)
        self.layer_map = LayerMap(())
        if spec.layerwise:
            self.layer_map = resolve(spec.layer_map, student_cfg.num_hidden_layers, teacher_cfg.num_hidden_layers)
        # heads of each layer step, as recorded for a model that kept or pruned some (models/shape.py)
        self.s_heads, self.t_heads = config_heads(student_cfg), config_heads(teacher_cfg)
        self.relation_heads = spec.relation_heads or teacher_cfg.num_attention_heads
        ds, dt = student_cfg.hidden_size, teacher_cfg.hidden_size
        self._head_dims = (ds // student_cfg.num_attention_heads, dt // teacher_cfg.num_attention_heads)
        channels = getattr(student_cfg, TEACHER_CHANNELS, None)  # set on width-pruned students
        channels = channels if channels is not None and max(channels, default=-1) < dt else None
        self.hidden_proj = im.make_projection(ds, dt, channels) if (spec.hidden or spec.cosine) else None
        self.embedding_proj = im.make_projection(ds, dt, channels) if spec.embedding else None
        self._check(spec, ds, dt)
        wants = {f for k, fs in _NEEDS.items() if getattr(spec, k) > 0 for f in fs}
        self.wants: frozenset[str] = frozenset(wants | ({"hidden"} if spec.masked_lm else set()))
        self.across: TeacherPieces | None = None

    def read_teacher_from(self, pieces: TeacherPieces) -> None:
        """Run the teacher on its own encoding of each batch's examples and compare it with the
        student on the positions both tokenizers cut alike (``distill.aligned_pieces``): for a
        student of another tokenizer. Raises ``RecipeError`` for terms that cannot be compared so."""
        if self.masked_lm or self.spec.attention_kl:
            term = "attention_kl" if self.spec.attention_kl else "mlm_soft/mlm_hard"
            raise RecipeError(f"objective.{term} compares whole distributions over the pieces of one tokenizer; "
                              "across tokenizers use hidden, embedding, cosine, attention_scores or qkv_relation")
        self.across = pieces

    def _check(self, spec: ObjectiveSpec, ds: int, dt: int) -> None:
        self._check_heads(spec)
        mixed = [p for p in self.layer_map.pairs if (p[0] == 0) != (p[1] == 0)]
        if mixed:
            raise RecipeError(f"objective.layer_map pairs {mixed} match the embeddings (0) with a layer; "
                              "embeddings are matched by the 'embedding' term")
        layer_terms = [k for k in LAYERWISE_TERMS if k != "embedding" and getattr(spec, k) > 0]
        if layer_terms and not any(i > 0 and j > 0 for i, j in self.layer_map.pairs):
            raise RecipeError(f"objective.{layer_terms[0]} needs at least one [student, teacher] layer pair > 0")
        if spec.qkv_relation and (ds % self.relation_heads or dt % self.relation_heads):
            raise RecipeError(
                f"objective.relation_heads={self.relation_heads} must divide both hidden sizes ({ds}, {dt})"
            )
        self._check_widths(spec)

    def _layer_pairs(self) -> list[tuple[int, int]]:
        """The matched (student, teacher) layers, 0-based (the embeddings left out)."""
        return [(i - 1, j - 1) for i, j in self.layer_map.pairs if i > 0 and j > 0]

    def _where(self, i: int, j: int) -> str:
        """`` in student layer i and teacher layer j`` where some layer's heads differ from another's
        (kept or pruned heads), else nothing: the plain message of two uniform models."""
        uniform = len(set(self.s_heads)) == 1 and len(set(self.t_heads)) == 1
        return "" if uniform else f" in student layer {i + 1} and teacher layer {j + 1}"

    def _check_heads(self, spec: ObjectiveSpec) -> None:
        """Raise ``RecipeError`` where a matched pair of layers has unequal head counts for a term
        that compares heads one to one."""
        heads_terms = [k for k in ("attention_scores", "attention_kl", "value_relation") if getattr(spec, k) > 0]
        for i, j in self._layer_pairs() if heads_terms else ():
            if self.s_heads[i] != self.t_heads[j]:
                raise RecipeError(
                    f"objective.{heads_terms[0]} compares attention heads one to one, but the student has "
                    f"{self.s_heads[i]} heads and the teacher {self.t_heads[j]}" + self._where(i, j)
                    + "; use qkv_relation (MiniLMv2) instead")

    def _check_widths(self, spec: ObjectiveSpec) -> None:
        """Raise ``RecipeError`` where ``relation_heads`` does not divide a matched layer's query/key/value
        width (a student that kept fewer heads of the teacher's width is narrower there than its hidden size)."""
        for i, j in self._layer_pairs() if spec.qkv_relation else ():
            widths = (self.s_heads[i] * self._head_dims[0], self.t_heads[j] * self._head_dims[1])
            if widths[0] % self.relation_heads or widths[1] % self.relation_heads:
                raise RecipeError(
                    f"objective.relation_heads={self.relation_heads} must divide the query/key/value width of "
                    f"student layer {i + 1} ({widths[0]}: {self.s_heads[i]} heads) and teacher layer {j + 1} "
                    f"({widths[1]})")

    # -- the training Objective ----------------------------------------------------------------
    @property
    def needs_teacher(self) -> bool:
        """True when the teacher runs on every batch (layer-wise or masked-LM terms)."""
        return bool(self.wants)

    @property
    def needs_teacher_logits(self) -> bool:
        """True when the stage needs cached teacher logits (prediction-layer KD)."""
        return self.prediction.needs_teacher_logits

    def check(self, model: nn.Module, teacher: nn.Module | None) -> None:
        """Masked-LM terms need masked-LM heads on both models (``ValueError`` otherwise)."""
        if self.masked_lm and not (is_masked_lm(model) and teacher is not None and is_masked_lm(teacher)):
            raise ValueError("masked-LM terms need a student and a teacher with MLM heads")

    def prepare(self, batch: dict[str, torch.Tensor]) -> Batch:
        """The batch, masked anew (from the loop's checkpointed RNG) when there are masked-LM terms."""
        out = supervised_batch(batch)
        if self.masked_lm:
            out.inputs, out.targets = self.mask(out.inputs)
        return out

    def _features(self, model: nn.Module, batch: Batch) -> Features:
        if self.masked_lm:
            return mlm_forward(model, batch.inputs, self.wants, batch.targets)
        return forward_features(model, batch.inputs, self.wants)

    def teacher_outputs(self, teacher: nn.Module, batch: Batch) -> Features:
        if self.across is None:
            return self._features(teacher, batch)
        index = batch.index.long()
        inputs = model_inputs(collate(self.across.encoding, index.tolist()))
        rows = self.across.alignment.rows(index, batch.inputs["input_ids"].shape[1])
        return on_student_positions(forward_features(teacher, inputs, self.wants), rows)

    def loss(self, model: nn.Module, batch: Batch, teacher_out: Any) -> torch.Tensor:
        return self.terms(self._features(model, batch), teacher_out, batch.targets, batch.teacher_logits)[0]

    @property
    def masked_lm(self) -> bool:
        """True when batches are masked and the MLM heads of both models are used."""
        return self.masking is not None

    def mask(self, inputs: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """Inputs with masked ``input_ids`` and the masked-LM labels (drawn from torch's RNG)."""
        if self.masking is None:
            raise ValueError("this objective has no masked-LM terms to mask batches for")
        ids, labels = mask_tokens(inputs["input_ids"], inputs["attention_mask"], self.masking)
        return {**inputs, "input_ids": ids}, labels

    def terms(
        self, s: Features, t: Features | None, labels: torch.Tensor, teacher_logits: torch.Tensor | None
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Total loss and its parts for one batch; ``t`` is required when layer-wise terms are on."""
        total = torch.zeros((), dtype=torch.float32)
        parts: dict[str, float] = {}
        if self.prediction.kd_weight > 0 or self.prediction.hard_weight > 0 or self.prediction.logit_mse > 0:
            pred, parts = self.prediction(s.logits.float(), labels, teacher_logits, s.attention_mask)
            total = total + pred
        if self.masked_lm:
            if t is None:
                raise ValueError("masked-LM terms need the teacher's features")
            for name, value in self._masked_lm(s, t, labels).items():
                total = total + getattr(self.spec, name) * value
                parts[name] = float(value.detach())
        if self.wants:
            if t is None:
                raise ValueError("layer-wise terms need the teacher's features")
            for name, value in self._layerwise(s, t).items():
                weight = getattr(self.spec, name)
                total = total + weight * value
                parts[name] = float(value.detach())
        return total, parts

    def _masked_lm(self, s: Features, t: Features, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        if self.spec.mlm_soft:
            out["mlm_soft"] = mlm_soft_kd(s.logits.float(), t.logits.float(), self.spec.temperature)
        if self.spec.mlm_hard:
            out["mlm_hard"] = mlm_hard_loss(s.logits, labels)
        return out

    def _layerwise(self, s: Features, t: Features) -> dict[str, torch.Tensor]:
        # across tokenizers the teacher's features sit on the student's positions, its mask marks the aligned ones
        spec, mask = self.spec, s.attention_mask if self.across is None else t.attention_mask
        out: dict[str, torch.Tensor] = {}
        if spec.embedding:
            out["embedding"] = im.hidden_mse(s.embeddings, t.embeddings, mask, self.embedding_proj)
        pairs = [(i, j) for i, j in self.layer_map.pairs if i > 0 and j > 0]
        if not pairs:
            return out
        n = float(len(pairs))
        terms = {
            "hidden": lambda i, j: im.hidden_mse(s.hidden[i], t.hidden[j], mask, self.hidden_proj),
            "cosine": lambda i, j: im.cosine_hidden(s.hidden[i], t.hidden[j], mask, self.hidden_proj),
            "attention_scores": lambda i, j: im.attention_score_mse(s.attn_scores[i], t.attn_scores[j], mask),
            "attention_kl": lambda i, j: im.attention_kl(s.attn_probs[i], t.attn_probs[j], mask),
            "value_relation": lambda i, j: im.value_relation_kl(s.values[i], t.values[j], self.s_heads[i],
                                                                self.t_heads[j], mask),
            "qkv_relation": lambda i, j: sum(
                im.self_relation_kl(getattr(s, f)[i], getattr(t, f)[j], self.relation_heads, mask)
                for f in ("queries", "keys", "values")
            ),
        }
        for name, fn in terms.items():
            if getattr(spec, name) > 0:
                # layer lists hold layer 1..L at index 0..L-1
                out[name] = sum(fn(i - 1, j - 1) for i, j in pairs) / n
        return out


def build_objective(spec: ObjectiveSpec, student_cfg, teacher_cfg, is_regression: bool,
                    tokenizer=None, head: Head = Head.SEQUENCE,
                    class_weights: tuple[float, ...] | None = None) -> DistillObjective:
    """The objective of one stage; raises ``RecipeError`` for terms the two shapes cannot support.

    ``tokenizer`` is needed for masked-LM terms (its ``[MASK]`` and special ids); ``head`` is the
    task's (``sequence``, ``span``, ``token``) and picks the prediction-layer losses;
    ``class_weights`` weigh the hard cross-entropy (the task's, when it asks for them)."""
    masking = None
    if spec.masked_lm:
        if tokenizer is None:
            raise ValueError("mlm_soft/mlm_hard need the tokenizer to mask batches")
        if student_cfg.vocab_size != teacher_cfg.vocab_size:
            raise RecipeError(f"mlm_soft compares distributions over the vocabulary: the student has "
                              f"{student_cfg.vocab_size} word pieces and the teacher {teacher_cfg.vocab_size}")
        masking = Masking.from_tokenizer(tokenizer, spec.mask_rate, vocab_size=student_cfg.vocab_size)
    return DistillObjective(spec, student_cfg, teacher_cfg, is_regression, masking, head, class_weights)


def _task_objective(spec: ObjectiveSpec, student: nn.Module, teacher: nn.Module, is_regression: bool,
                    tokenizer, head: Head, class_weights: tuple[float, ...] | None) -> DistillObjective:
    """Layer-wise terms read each model's real per-layer shape; prediction-only terms its config
    alone, so a teacher with no PyTorch layers to read (an ONNX or OpenVINO form) still teaches."""
    shape = with_layer_shape if spec.layerwise else (lambda model: model.config)
    return build_objective(spec, shape(student), shape(teacher), is_regression, tokenizer, head, class_weights)


def _vector_objective(spec: ObjectiveSpec, student: nn.Module, teacher: nn.Module, is_regression: bool,
                      tokenizer, head: Head, class_weights: tuple[float, ...] | None) -> nn.Module:
    """The embedding head's objective: the stage's vector terms (``vector_mse``, ``vector_cosine``,
    ``similarity_kd``, against ``similarity_memory`` earlier texts too) between the student's and the
    teacher's sentence vectors, widths read from the two models (``.dim``); with ``keep_start`` the
    targets are wider by the student's own width (:func:`tinyplm.distill.embedding.blend_targets`)."""
    from tinyplm.distill.embedding import EmbeddingLossWeights, EmbeddingObjective

    weights = EmbeddingLossWeights(mse=spec.vector_mse, cosine=spec.vector_cosine, similarity=spec.similarity_kd)
    target_dim = int(teacher.dim) + (int(student.dim) if spec.keep_start > 0 else 0)  # blend_targets' width
    return EmbeddingObjective(int(student.dim), target_dim, weights, spec.similarity_memory)


#: Each head's stage objective: (spec, student, teacher, is_regression, tokenizer, head, class_weights) ->
#: the training objective. The heads with logits weigh the recipe's prediction, layer-wise and masked-LM
#: terms (:func:`build_objective`); the embedding head its vector terms.
STAGE_OBJECTIVES: PerHead = PerHead("stage objective", {Head.SEQUENCE: _task_objective, Head.SPAN: _task_objective,
                                                        Head.TOKEN: _task_objective, Head.EMBEDDING: _vector_objective})


def stage_objective(spec: ObjectiveSpec, student: nn.Module, teacher: nn.Module, is_regression: bool,
                    tokenizer=None, head: Head = Head.SEQUENCE,
                    class_weights: tuple[float, ...] | None = None) -> nn.Module:
    """The objective of one stage of ``student`` learning from ``teacher`` on a task of ``head``
    (:data:`STAGE_OBJECTIVES`). Raises ``RecipeError`` for terms the two models cannot support."""
    return STAGE_OBJECTIVES[head](spec, student, teacher, is_regression, tokenizer, head, class_weights)
