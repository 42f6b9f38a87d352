"""Building blocks shared by recipe sections: the frozen ``Section`` base, one training stage
(``TrainSpec``) and a distillation objective (``ObjectiveSpec``)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

from tinyplm.config.finetune import OPTION_METHODS, START_AVERAGE_METHODS, Method, MethodOptions, check_options

Precision = Literal["auto", "bf16", "fp32"]
#: The precision of a measurement or of targets computed for training (dev checks, reported metrics,
#: teacher logits, augmentation): named, never ``auto``, so the result does not depend on the CPU.
Exact = Literal["fp32", "bf16"]


class Section(BaseModel):
    """Base for recipe sections: frozen, unknown keys are errors.

    ``_unwritten_defaults`` names keys added after runs were made: a dump leaves each out while it
    holds its default, so a resolved recipe (and the run dir claimed with it, which a finished run
    is reused by) stays what it was before the key existed. A section with its own serializer
    (``TrainSpec``, ``FamilySpec``) does the same its own way."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    _unwritten_defaults: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _new_defaults_unwritten(self, handler):
        data = handler(self)
        if isinstance(data, dict):
            for key in self._unwritten_defaults:
                if getattr(self, key) == type(self).model_fields[key].default:
                    data.pop(key, None)
        return data


class TrainSpec(Section):
    """One training stage: optimiser, schedule, budget, evaluation and checkpoints."""

    epochs: float = Field(3.0, gt=0)
    max_steps: int | None = Field(None, ge=1, description="stop after this many optimiser steps")
    budget_minutes: float | None = Field(None, gt=0, description="stop after this much training time")
    batch_size: int = Field(32, ge=1, description="global batch size (split across processes)")
    eval_batch_size: int = Field(64, ge=1)
    lr: float = Field(5e-5, gt=0)
    weight_decay: float = Field(0.01, ge=0)
    warmup_ratio: float = Field(0.06, ge=0, lt=1)
    grad_clip: float = Field(1.0, ge=0, description="max gradient norm; 0 disables clipping")
    eval_every: int = Field(200, ge=0, description="steps between dev evaluations; 0 = only at the end")
    checkpoint_every: int = Field(200, ge=0, description="steps between checkpoints; 0 = none")
    log_every: int = Field(20, ge=1)
    group_by_length: bool = Field(True, description="batch examples of similar length (much less padding)")
    keep_best: bool = Field(True, description="restore the best dev checkpoint at the end")
    precision: Precision = Field("auto", description="training: auto = bf16 autocast where the CPU supports it "
                                 "(or the TINYPLM_BF16 switch says so); recorded in results.json")
    eval_precision: Exact = Field("fp32", description="the dev checks during training (which checkpoint is kept): "
                                  "fp32 so the choice does not depend on the CPU")
    seed: int = 42
    method: Method = Field(Method.FULL, description="full | frozen | ulmfit | bitfit | lora | ia3 | prompt_tuning | "
                                                    "prefix_tuning (see config/finetune.py)")
    method_options: MethodOptions = Field(MethodOptions(), description="options of the fine-tuning method")
    keep_start_weights: float = Field(0.0, ge=0, lt=1, description="the share of the stage's start weights "
                                      "averaged into what it trained (WiSE-FT, Wortsman et al. 2022): the saved "
                                      "model, and every evaluation choosing a checkpoint, use k * start + (1 - k) * "
                                      "trained; keeps what the start knew of texts the stage never shows. 0 = the "
                                      "trained weights")
    ema_decay: float = Field(0.0, ge=0, lt=1, description="an exponential moving average of the weights, moving "
                             "1 - d of the way to them each step (a horizon of about 1 / (1 - d) steps): every "
                             "evaluation choosing a checkpoint, and the saved model, use the average "
                             "(train/weight_average.py). 0 = the trained weights")

    @model_validator(mode="after")
    def _options_of_method(self) -> TrainSpec:
        check_options(self.method, self.method_options)
        if self.ema_decay > 0 and self.keep_start_weights > 0:
            raise ValueError("ema_decay and keep_start_weights both replace the trained weights by a blend; "
                             "set one of them to 0")
        if self.ema_decay > 0 and self.method not in START_AVERAGE_METHODS:
            raise ValueError(f"ema_decay = {self.ema_decay} averages the model's own weights, which method "
                             f"{self.method.value} leaves as they were; use it with method "
                             f"{' | '.join(sorted(m.value for m in START_AVERAGE_METHODS))}, or set it to 0")
        if self.keep_start_weights > 0 and self.method not in START_AVERAGE_METHODS:
            raise ValueError(f"keep_start_weights = {self.keep_start_weights} averages the model's own weights, "
                             f"which method {self.method.value} leaves as they were (it trains an adapter, prompt "
                             f"or head beside them); use it with method "
                             f"{' | '.join(sorted(m.value for m in START_AVERAGE_METHODS))}, or set it to 0")
        return self

    @model_serializer(mode="wrap")
    def _default_method_unwritten(self, handler):
        """Leave ``method``/``method_options``, ``keep_start_weights`` and ``ema_decay`` out of a dump while they are
        the defaults, so a resolved recipe (and the run dir claimed with it) is the same as before
        they existed; else write only the options this method reads (so the dump loads back)."""
        data = handler(self)
        if not isinstance(data, dict):
            return data
        if self.keep_start_weights == 0:
            data.pop("keep_start_weights", None)
        if self.ema_decay == 0:
            data.pop("ema_decay", None)
        if self.method is Method.FULL and not self.method_options.model_fields_set:
            data.pop("method", None)
            data.pop("method_options", None)
        elif isinstance(data.get("method_options"), dict):
            data["method_options"] = {k: v for k, v in data["method_options"].items()
                                      if self.method in OPTION_METHODS[k]}
        return data


class ObjectiveSpec(Section):
    """What a distillation stage minimises: a weighted sum of the terms below (0 = off).

    Prediction layer (Hinton): ``kd_weight * T^2 * KL(softmax(t/T) || softmax(s/T)) +
    hard_weight * CE(s, y)``; for regression tasks the KD term is the MSE to the teacher's outputs.
    Layer-wise terms compare the student's layers with the teacher's layers paired by
    ``layer_map`` (a preset: uniform/tinybert, last/minilm, or explicit [[student, teacher], ...],
    1-based, 0 = embeddings).
    """

    temperature: float = Field(1.0, gt=0)
    kd_weight: float = Field(1.0, ge=0, description="soft-target KD on the logits")
    hard_weight: float = Field(0.0, ge=0, description="cross-entropy (or MSE) to the gold labels")
    embedding: float = Field(0.0, ge=0, description="TinyBERT embedding-output MSE (projected when widths differ)")
    hidden: float = Field(0.0, ge=0, description="TinyBERT hidden-state MSE over matched layers (projected)")
    attention_scores: float = Field(0.0, ge=0, description="TinyBERT attention-score MSE (equal head counts)")
    attention_kl: float = Field(0.0, ge=0, description="MiniLM attention-distribution KL (equal head counts)")
    value_relation: float = Field(0.0, ge=0, description="MiniLM value-relation KL (equal head counts)")
    qkv_relation: float = Field(0.0, ge=0, description="MiniLMv2 query/key/value self-relation KL")
    relation_heads: int | None = Field(None, ge=1, description="MiniLMv2 relation heads (default: teacher's heads)")
    cosine: float = Field(0.0, ge=0, description="DistilBERT cosine alignment of matched hidden states")
    layer_map: str | list[list[int]] = Field("uniform", description="uniform | last | [[student, teacher], ...]")
    mlm_soft: float = Field(0.0, ge=0, description="DistilBERT soft-target KD over the vocabulary at masked positions "
                                                   "(uses temperature)")
    mlm_hard: float = Field(0.0, ge=0, description="masked-LM cross-entropy of the student at masked positions")
    mask_rate: float = Field(0.15, gt=0, lt=1, description="fraction of tokens masked (80% [MASK], 10% random, "
                                                           "10% kept) for mlm terms")
    logit_mse: float = Field(0.0, ge=0, description="MSE between the student's and the teacher's logits (Tang et "
                                                    "al. 2019: distilling BERT into a BiLSTM); sentence tasks")
    vector_mse: float = Field(0.0, ge=0, description="embedding task: MSE between the student's sentence vector and "
                              "the teacher's (through a learned projection when widths differ; Reimers & Gurevych "
                              "2020). On unit vectors its values are small: weigh it about dim/2 times a cosine term")
    vector_cosine: float = Field(0.0, ge=0, description="embedding task: 1 - cosine of the student's (projected) "
                                 "vector and the teacher's")
    similarity_kd: float = Field(0.0, ge=0, description="embedding task: MSE between the student's and the "
                                 "teacher's in-batch cosine matrices (needs no common width)")
    similarity_memory: int = Field(0, ge=0, description="embedding task: the similarity_kd term also compares each "
                                   "batch with this many texts of the batches before it (a cross-batch memory): "
                                   "batches are grouped by length, so only there do short texts (questions) meet "
                                   "long ones (passages); 0 = the batch alone")
    keep_start: float = Field(0.0, ge=0, lt=1, description="embedding task: the share of each target the student's "
                              "own vectors from before the stage keep (learning without forgetting): the targets are "
                              "the teacher's vectors and those start vectors side by side, so the cosine of two "
                              "targets is the mean of the teacher's cosine and the start's, weighted 1 - keep_start "
                              "and keep_start; 0 = the teacher's vectors alone")

    @model_validator(mode="after")
    def _some_weight(self) -> ObjectiveSpec:
        if not any(getattr(self, k) > 0 for k in LOSS_TERMS):
            raise ValueError(f"every loss weight is 0 ({', '.join(LOSS_TERMS)}): nothing to train on")
        return self

    @model_validator(mode="after")
    def _memory_needs_similarity(self) -> ObjectiveSpec:
        if self.similarity_memory and not self.similarity_kd > 0:
            raise ValueError(f"similarity_memory = {self.similarity_memory} serves the similarity_kd term: set "
                             "similarity_kd > 0, or similarity_memory to 0")
        return self

    @model_validator(mode="after")
    def _keep_start_needs_vectors(self) -> ObjectiveSpec:
        if self.keep_start > 0 and not self.vectors:
            raise ValueError(f"keep_start = {self.keep_start} blends the targets of the embedding task's vector terms: "
                             f"set one of {', '.join(VECTOR_TERMS)} > 0, or keep_start to 0")
        return self

    @model_validator(mode="after")
    def _mlm_replaces_prediction(self) -> ObjectiveSpec:
        if self.masked_lm and (self.kd_weight > 0 or self.hard_weight > 0 or self.logit_mse > 0 or self.vectors):
            raise ValueError("mlm_soft/mlm_hard train a masked-LM head instead of the task head: set kd_weight, "
                             "hard_weight, logit_mse and the vector terms to 0 in this stage")
        return self

    @property
    def masked_lm(self) -> bool:
        """True when the stage masks its input and trains the student's masked-LM head."""
        return self.mlm_soft > 0 or self.mlm_hard > 0

    @property
    def vectors(self) -> bool:
        """True when any term compares sentence vectors (the embedding task's terms)."""
        return any(getattr(self, k) > 0 for k in VECTOR_TERMS)

    @property
    def predicts(self) -> bool:
        """True when the stage trains what the task is scored on (logits or sentence vectors), so
        evaluating it while it trains (and keeping its best checkpoint) means something."""
        return self.kd_weight > 0 or self.hard_weight > 0 or self.logit_mse > 0 or self.vectors

    @property
    def layerwise(self) -> bool:
        """True when any term needs the teacher's intermediate features."""
        return any(getattr(self, k) > 0 for k in LAYERWISE_TERMS)


LAYERWISE_TERMS = ("embedding", "hidden", "attention_scores", "attention_kl", "value_relation", "qkv_relation",
                   "cosine")
MLM_TERMS = ("mlm_soft", "mlm_hard")
#: The embedding task's terms: what the student's sentence vectors are pulled towards.
VECTOR_TERMS = ("vector_mse", "vector_cosine", "similarity_kd")
LOSS_TERMS = ("kd_weight", "hard_weight", "logit_mse", *LAYERWISE_TERMS, *MLM_TERMS, *VECTOR_TERMS)


class ShapeSpec(Section):
    """A BERT encoder shape."""

    _unwritten_defaults = ("keep_heads",)

    layers: int = Field(..., ge=1)
    hidden: int = Field(..., ge=8)
    heads: int = Field(..., ge=1)
    ffn: int = Field(..., ge=1)
    keep_heads: int | None = Field(
        None, ge=1, description="attention heads each layer keeps from the start, the strongest of the teacher's "
        "by weight (each hidden/heads wide, as prune_heads leaves them); a student of teacher_layers only; "
        "default: all of them")

    @model_validator(mode="after")
    def _heads_divide_hidden(self) -> ShapeSpec:
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads})")
        if self.keep_heads is not None and self.keep_heads > self.heads:
            raise ValueError(f"keep_heads ({self.keep_heads}) cannot exceed heads ({self.heads})")
        return self
