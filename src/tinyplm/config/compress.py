"""Recipe sections of compression steps: a student's ``compress:`` list, one ``kind`` per step.

Steps run in the listed order on the student's distilled model (or on the teacher itself, with
``init_from: teacher``); each may be followed by ``recover``y distillation from the teacher and is
its own stage in the report (``<student>.<step name>``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from tinyplm.config.base import ObjectiveSpec, Section, TrainSpec

STEP_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class RecoverySpec(Section):
    """Distillation from the teacher after a step (default: prediction-layer KD on the task data)."""

    data: Literal["task", "augmented"] = "task"
    objective: ObjectiveSpec = ObjectiveSpec()
    train: TrainSpec = TrainSpec()

    @model_validator(mode="after")
    def _task_teacher(self) -> RecoverySpec:
        if self.objective.masked_lm:
            raise ValueError("mlm_soft/mlm_hard need a teacher with a masked-LM head, and a recovery distils from "
                             "the fine-tuned teacher, which has none: recover with the task's terms (kd_weight, "
                             "hard_weight, logit_mse or the layer-wise ones)")
        return self


class _Step(Section):
    name: str | None = Field(None, pattern=STEP_NAME, description="stage name suffix; default: the kind")
    recover: RecoverySpec | None = Field(None, description="distil from the teacher after this step")


class _Scored(_Step):
    keep: float = Field(..., gt=0, le=1, description="fraction of units kept")
    scope: Literal["global", "layer"] = "global"
    score_batches: int = Field(32, ge=1, description="training batches for Taylor importance")
    score_batch_size: int = Field(32, ge=1)


class PruneHeads(_Scored):
    """Remove the least important attention heads (Michel et al. 2019), at least one per layer."""

    kind: Literal["prune_heads"]


class PruneFFN(_Scored):
    """Remove the least important FFN neurons; ``scope: layer`` keeps one FFN width (plain HF BERT)."""

    kind: Literal["prune_ffn"]
    scope: Literal["global", "layer"] = "layer"


class DropLayers(_Step):
    """Remove encoder layers: a list (0-based) or the ``count`` least important."""

    kind: Literal["drop_layers"]
    layers: list[int] | None = Field(None, description="layers to drop, 0-based")
    count: int | None = Field(None, ge=1, description="drop this many of the least important layers")
    score_batches: int = Field(32, ge=1)
    score_batch_size: int = Field(32, ge=1)

    @model_validator(mode="after")
    def _one_way(self) -> DropLayers:
        if (self.layers is None) == (self.count is None):
            raise ValueError("drop_layers takes exactly one of 'layers' (a list) or 'count'")
        if self.layers is not None and not self.layers:
            raise ValueError("drop_layers.layers is empty")
        return self


class Share(_Step):
    """ALBERT-style cross-layer sharing (all, attention-only or FFN-only), from the layers' mean."""

    kind: Literal["share"]
    mode: Literal["all", "attention", "ffn"] = "all"
    groups: list[list[int]] | None = Field(None, description="layer groups that share (default: all layers, one group)")


class RankRule(Section):
    """How to pick a rank: a share of the full rank, or the kept share of spectral energy."""

    ratio: float | None = Field(None, gt=0, le=1)
    energy: float | None = Field(None, gt=0, le=1)

    @model_validator(mode="after")
    def _one(self) -> RankRule:
        if (self.ratio is None) == (self.energy is None):
            raise ValueError("give exactly one of 'ratio' or 'energy'")
        return self


ROLE_NAMES = Literal["query", "key", "value", "attn_out", "ffn_in", "ffn_out"]


class Svd(_Step):
    """Low-rank factorization of the encoder's Linear layers by truncated SVD, per role."""

    kind: Literal["svd"]
    ratio: float | None = Field(None, gt=0, le=1, description="rank = ratio * full rank")
    energy: float | None = Field(None, gt=0, le=1, description="smallest rank keeping this share of spectral energy")
    roles: list[ROLE_NAMES] = Field(["query", "key", "value", "attn_out", "ffn_in", "ffn_out"])
    per_role: dict[ROLE_NAMES, RankRule] = Field(default_factory=dict,
                                                 description="rules that replace ratio/energy for a role")

    @model_validator(mode="after")
    def _rule(self) -> Svd:
        if (self.ratio is None) == (self.energy is None) and set(self.roles) - set(self.per_role):
            raise ValueError("svd: give exactly one of 'ratio' or 'energy' (or a per_role rule for every role)")
        return self

    def rules(self) -> dict[str, dict[str, float]]:
        """role -> {"ratio": r} or {"energy": e}."""
        default = {"ratio": self.ratio} if self.ratio is not None else {"energy": self.energy}
        out = {r: default for r in self.roles}
        out.update({r: rule.model_dump(exclude_none=True) for r, rule in self.per_role.items()})
        return out


class FactorizeEmbeddings(_Step):
    """ALBERT's factorized embeddings: V x E then E x H, from the truncated SVD of the table."""

    kind: Literal["factorize_embeddings"]
    rank: int = Field(..., ge=1, description="E, the inner width")


class Qat(_Step):
    """Quantization-aware training: int8 fake quantization during ``recover``, then int8 with ONNX Runtime."""

    kind: Literal["qat"]
    convert: Literal["onnx_static_int8", "onnx_dynamic_int8"] = "onnx_static_int8"
    calibration_examples: int = Field(256, ge=1, description="training examples to calibrate on (static)")

    @model_validator(mode="after")
    def _needs_training(self) -> Qat:
        if self.recover is None:
            raise ValueError("qat trains with fake quantization: give it a 'recover' section")
        return self


class TrimVocab(_Step):
    """Keep the word pieces the task's train and dev data use (plus the specials); the tokenizer
    is remapped and saved beside the model. Only quantization steps may follow it: the student's
    token ids no longer match the teacher's, so it cannot be distilled further."""

    kind: Literal["trim_vocab"]

    @model_validator(mode="after")
    def _no_recovery(self) -> TrimVocab:
        if self.recover is not None:
            raise ValueError("trim_vocab cannot be followed by recovery: the teacher's token ids differ from the "
                             "trimmed student's; recover in the step before it")
        return self


class _Final(_Step):
    """A step whose model cannot be trained further: it ends the list and has no recovery."""

    @model_validator(mode="after")
    def _no_recovery(self) -> _Final:
        if self.recover is not None:
            raise ValueError(f"{self.kind} gives a model that cannot be trained: drop 'recover' "
                             "(recover in the step before it, or use quantization-aware training)")
        return self


class _Sparse(_Step):
    sparsity: float = Field(..., gt=0, lt=1, description="final share of zero weights in the encoder's Linear layers")
    scope: Literal["global", "layer"] = "global"
    update_every: int = Field(10, ge=1, description="optimiser steps between mask updates")
    final_fraction: float = Field(0.1, ge=0, lt=1, description="last share of training held at the final sparsity")

    @model_validator(mode="after")
    def _needs_training(self) -> _Sparse:
        if self.recover is None:
            raise ValueError(f"{self.kind} prunes during training: give it a 'recover' section "
                             "(the distillation during which the masks are learnt)")
        if self.recover.train.ema_decay > 0:
            raise ValueError(f"{self.kind} learns masks during its recovery, and recover.train.ema_decay would "
                             "average weights whose masks change as they train (an average that is not sparse, and "
                             "torch's AveragedModel cannot copy a masked model): drop ema_decay here, or average in "
                             "the stage before the step")
        return self


class Magnitude(_Sparse):
    """Unstructured magnitude pruning on a cubic schedule during recovery distillation."""

    kind: Literal["magnitude"]


class Movement(_Sparse):
    """Movement pruning (Sanh et al. 2020): weights moving towards zero are pruned, during recovery."""

    kind: Literal["movement"]


#: The description of ``reduce_range`` on the int8 steps (see ``tinyplm.models.int8_cpu``).
REDUCE_RANGE = ("7-bit weights, which keep int8 products from saturating on x86 CPUs without VNNI; default: "
                "on where this CPU has no VNNI (set true for a model deployed on such a CPU)")


class _OnnxStep(_Final):
    _unwritten_defaults = ("reduce_range",)

    per_channel: bool = Field(True, description="one int8 scale per output channel of each weight")
    embeddings: bool = Field(False, description="quantize the embedding tables too (int8 Gather)")
    reduce_range: bool | None = Field(None, description=REDUCE_RANGE)


class DynamicInt8(_Final):
    """torch.ao dynamic quantization of the encoder's Linear layers (int8 weights per channel)."""

    kind: Literal["dynamic_int8"]


class Int4Weight(_Final):
    """4-bit weight-only group-wise quantization of the encoder's Linear layers, stored packed."""

    kind: Literal["int4_weight"]
    group_size: int = Field(64, ge=2, multiple_of=2,
                            description="weights per fp16 scale (even; rows are padded to whole groups)")


class Bf16(_Final):
    """All weights in bfloat16 (fast on CPUs with AMX / AVX512-BF16)."""

    kind: Literal["bf16"]


class OnnxDynamicInt8(_OnnxStep):
    """ONNX Runtime dynamic quantization: int8 weights, activations quantized per batch."""

    kind: Literal["onnx_dynamic_int8"]


class OnnxStaticInt8(_OnnxStep):
    """ONNX Runtime static quantization: int8 weights and activations calibrated on training examples."""

    kind: Literal["onnx_static_int8"]
    calibration_examples: int = Field(256, ge=1, description="training examples to calibrate on")
    calibration_method: Literal["minmax", "entropy", "percentile"] = "minmax"


OvPrecision = Literal["auto", "f32", "bf16"]


#: What ``weights`` of an OpenVINO float model means.
OV_WEIGHTS = ("how the weight matrices are stored: float, or int8 (per output channel, symmetric; about 4x "
              "fewer bytes), widened to the compute precision when the model is compiled, so it runs at the "
              "float model's speed")


class OpenVino(_Final):
    """The model in OpenVINO IR, run by its CPU plugin in ``precision`` (``auto``: bf16 where the CPU
    has it, as OpenVINO does by default; ``f32``; ``bf16``)."""

    _unwritten_defaults = ("weights",)

    kind: Literal["openvino"]
    precision: OvPrecision = "auto"
    embeddings: bool = Field(False, description="int8 weight compression of the embedding tables (NNCF)")
    weights: Literal["float", "int8"] = Field("float", description=OV_WEIGHTS)


class OpenVinoInt8(_Final):
    """NNCF post-training int8 quantization, run by OpenVINO (the rest of the graph in ``precision``)."""

    _unwritten_defaults = ("reduce_range",)

    kind: Literal["openvino_int8"]
    precision: OvPrecision = "auto"
    calibration_examples: int = Field(300, ge=1, description="training examples to calibrate on")
    embeddings: bool = Field(False, description="int8 weight compression of the embedding tables too")
    max_drop: float | None = Field(None, gt=0, lt=1, description="accuracy-controlled quantization: at most "
                                   "this absolute drop on held-out training examples (never dev)")
    control_examples: int = Field(300, ge=10, description="held-out training examples max_drop is checked on")
    reduce_range: bool | None = Field(None, description=REDUCE_RANGE + " (NNCF's overflow fix on every layer)")


#: The final forms a ``runtime: fastest`` step chooses among.
RUNTIME_KINDS = ("onnx_dynamic_int8", "onnx_static_int8", "openvino", "openvino_int8")


class FastestRuntime(_Final):
    """Make each ``candidates`` form of the model (with default settings, ``embeddings`` as given),
    time them side by side, and keep the fastest one shown, at one-sided 95% confidence shared by
    the candidates, to flip at most ``max_flip`` of its PyTorch parent's predictions and to lose at
    most ``max_drop`` accuracy against it, on the task's held-out examples (``task.holdout``), else
    on the ``control_examples`` longest training examples; dev is never used to choose. An embedding
    model has no predictions: it is kept when the lower bound of its vectors' mean cosine to its
    parent's on those texts is at least ``min_cosine`` (``max_drop``, ``max_flip`` and
    ``flip_tolerance`` apply to classifiers only, ``min_cosine`` to the embedding head only). The
    rule and its statistics: ``tinyplm.compress.runtime``."""

    kind: Literal["runtime"]
    runtime: Literal["fastest"] = "fastest"
    candidates: list[Literal["onnx_dynamic_int8", "onnx_static_int8", "openvino", "openvino_int8"]] = Field(
        default_factory=lambda: ["onnx_dynamic_int8", "openvino", "openvino_int8"], min_length=1)
    embeddings: bool = Field(True, description="int8 embedding tables in every candidate that can have them")
    max_drop: float = Field(0.005, gt=0, lt=1, description="allowed accuracy drop against the PyTorch parent "
                            "(regression: increase of the mean squared error), as an upper confidence bound")
    max_flip: float = Field(0.01, gt=0, lt=1, description="allowed share of the PyTorch parent's predictions a "
                            "candidate changes, as an upper confidence bound; more and it is refused")
    flip_tolerance: float = Field(0.1, gt=0, description="regression: a prediction that moves by more than this "
                                  "counts as changed (flipped)")
    control_examples: int = Field(2000, ge=10, description="longest training examples (outside calibration) the "
                                  "candidates are judged on when the task has no held-out examples")
    calibration_examples: int = Field(300, ge=1)
    reduce_range: bool | None = Field(None, description=REDUCE_RANGE + " (every int8 candidate)")
    weights: Literal["float", "int8"] = Field("float", description="the openvino candidate's weights: "
                                              + OV_WEIGHTS)
    min_cosine: float = Field(0.99, gt=0, le=1, description="embedding head only: the least mean cosine of a "
                              "candidate's vectors to its PyTorch parent's, as a lower confidence bound; less and "
                              "it is refused")

    _unwritten_defaults = ("reduce_range", "weights", "max_flip", "flip_tolerance", "min_cosine")


CompressStep = Annotated[
    PruneHeads | PruneFFN | DropLayers | Magnitude | Movement | Share | Svd | FactorizeEmbeddings
    | TrimVocab | Qat | OnnxDynamicInt8 | OnnxStaticInt8 | DynamicInt8 | Int4Weight | Bf16 | OpenVino
    | OpenVinoInt8 | FastestRuntime,
    Field(discriminator="kind"),
]
#: Steps that act during their recovery training (a controller set up before it, finished after it).
SCHEDULED_KINDS = ("magnitude", "movement", "qat")
#: Steps whose model cannot be trained or compressed further: nothing can follow them.
TERMINAL_KINDS = ("qat", "onnx_dynamic_int8", "onnx_static_int8", "dynamic_int8", "int4_weight", "bf16",
                  "openvino", "openvino_int8", "runtime")
#: What may follow trim_vocab (nothing that trains against the teacher).
AFTER_TRIM = ("onnx_dynamic_int8", "onnx_static_int8", "dynamic_int8", "int4_weight", "bf16", "openvino",
              "openvino_int8", "runtime")


def step_name(step) -> str:
    """The step's stage-name suffix: its ``name`` or its ``kind``."""
    return step.name or step.kind


def _uneven_parts(step) -> set[str]:
    """The layer parts (attention, ffn) that ``step`` may leave of different shapes across layers."""
    if step.kind in ("prune_heads", "prune_ffn") and step.scope == "global":
        return {"attention" if step.kind == "prune_heads" else "ffn"}
    if step.kind == "svd":
        return {"attention", "ffn"}
    return set()


#: The Linear roles each pruning step cuts rows or columns of.
PRUNED_ROLES = {"prune_heads": ("query", "key", "value", "attn_out"), "prune_ffn": ("ffn_in", "ffn_out")}


def check_step_order(steps) -> None:
    """An order of a student's ``compress`` steps that would fail mid-run, after the training before
    it, is refused now: :func:`check_share_order`, and pruning heads or neurons of a Linear an
    earlier ``svd`` step may have factorized (a low-rank pair has no rows to cut). Raises ``ValueError``."""
    check_share_order(steps)
    factorized: dict[str, str] = {}
    for step in steps:
        clash = [r for r in PRUNED_ROLES.get(step.kind, ()) if r in factorized]
        if clash:
            raise ValueError(f"compress step {step_name(step)} ({step.kind}) cannot follow {factorized[clash[0]]} "
                             f"(svd), which factorizes the {clash[0]} Linear it would cut; prune before svd, "
                             "or leave that role out of the svd step's roles")
        if step.kind == "svd":
            for role in (*step.roles, *step.per_role):
                factorized.setdefault(role, step_name(step))


def check_share_order(steps) -> None:
    """``share`` ties layers whose parts have one shape: after a step that may leave them of
    different shapes per layer (a student's ``compress`` list, in order) it would fail mid-run, so
    the recipe is refused now. Raises ``ValueError`` naming both steps and what would work."""
    uneven: dict[str, str] = {}
    for step in steps:
        if step.kind == "share":
            parts = {"all": ("attention", "ffn")}.get(step.mode, (step.mode,))
            clash = [p for p in parts if p in uneven]
            if clash:
                raise ValueError(f"compress step {step_name(step)} (share, mode {step.mode}) cannot follow "
                                 f"{uneven[clash[0]]}, which may leave each layer's {clash[0]} a different "
                                 "shape; share before it" + (", or prune with scope: layer"
                                                             if uneven[clash[0]].startswith("prune") else ""))
        for part in _uneven_parts(step):
            uneven.setdefault(part, step_name(step))
