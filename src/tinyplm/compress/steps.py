"""The registry of compression steps: recipe ``kind`` -> function that changes a model in place.

``apply_step(model, step, ctx)`` runs one step -> (the compressed model, what it did for the
report). Pruning changes the model in place; quantization to ONNX returns a new model.
Recovery training after a step is not here: the run's stage machinery does it (see
``tinyplm.stages.run_compress``), so this package never imports the run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from tinyplm.compress.importance import importance
from tinyplm.compress.onnx_quant import dynamic_int8, static_int8
from tinyplm.compress.openvino import openvino_float, openvino_int8
from tinyplm.compress.qat import FakeQuant
from tinyplm.compress.runtime import candidate_step, choose_fastest, sub_context
from tinyplm.compress.sparse import Sparsifier
from tinyplm.compress.structured import drop_layers, least_important_layers, prune_ffn, prune_heads
from tinyplm.compress.vocab import trim_vocab
from tinyplm.config.compress import (
    Bf16,
    DropLayers,
    DynamicInt8,
    FactorizeEmbeddings,
    FastestRuntime,
    Int4Weight,
    OnnxDynamicInt8,
    OnnxStaticInt8,
    OpenVino,
    OpenVinoInt8,
    PruneFFN,
    PruneHeads,
    Share,
    Svd,
    TrimVocab,
)
from tinyplm.models import roles
from tinyplm.models.factorized import factorize_embeddings, factorize_roles, share_layers
from tinyplm.models.int8_cpu import reduce_range
from tinyplm.models.quantized import quantize_int4, quantize_int8_dynamic, to_bf16
from tinyplm.tasks.encoding import Encoded
from tinyplm.tasks.heads import Head
from tinyplm.tasks.holdout import HOLDOUT


@dataclass
class CompressContext:
    """What steps read: the task's training data, teacher logits on it (or None), the task kind,
    a scratch folder, and for vocabulary trimming the tokenizer, dev encodings, a sample of the
    texts and how to re-encode the data with a new tokenizer. A step that changes the tokenizer
    updates ``tokenizer``, ``train`` and ``evals`` here, for the steps after it and for the run."""

    train: Encoded
    teacher_logits: torch.Tensor | Callable[[], torch.Tensor] | None  # a callable is computed on first use
    is_regression: bool
    work_dir: Path
    seed: int = 0
    head: Head = Head.SEQUENCE
    tokenizer: object = None
    evals: dict[str, Encoded] = field(default_factory=dict)
    texts: list[tuple[str, str | None]] = field(default_factory=list)
    reencode: Callable[[object], tuple[Encoded, dict[str, Encoded]]] | None = None
    # models -> sentences/s each, timed side by side on the same batches (the run's measuring code)
    timer: Callable[[dict[str, nn.Module], Encoded], dict[str, float]] | None = None

    def logits(self) -> torch.Tensor | None:
        """Teacher logits on ``train`` (computed once, and only by the steps that score units)."""
        if callable(self.teacher_logits):
            self.teacher_logits = self.teacher_logits()
        return self.teacher_logits


def _scores(model: nn.Module, step, ctx: CompressContext):
    return importance(model, ctx.train, batches=step.score_batches, batch_size=step.score_batch_size,
                      seed=ctx.seed, teacher_logits=ctx.logits(), is_regression=ctx.is_regression, head=ctx.head)


Result = tuple[nn.Module, dict]


def _prune_heads(model: nn.Module, step: PruneHeads, ctx: CompressContext) -> Result:
    roles.require(model, roles.Stage.PRUNE_HEADS)  # before scoring: say at once why a family cannot
    return model, prune_heads(model, _scores(model, step, ctx), step.keep, step.scope)


def _prune_ffn(model: nn.Module, step: PruneFFN, ctx: CompressContext) -> Result:
    return model, prune_ffn(model, _scores(model, step, ctx), step.keep, step.scope)


def _drop_layers(model: nn.Module, step: DropLayers, ctx: CompressContext) -> Result:
    if step.layers is not None:
        return model, drop_layers(model, list(step.layers))
    keep_first = roles.roles_of(model).first_layer is not None  # ModernBERT: layer 0 has no attention norm
    return model, drop_layers(model, least_important_layers(_scores(model, step, ctx), step.count, keep_first))


def _scheduled(model: nn.Module, step, ctx: CompressContext) -> Result:
    """Magnitude/movement pruning and QAT act during recovery (see :func:`controller`)."""
    if step.kind == "qat":
        return model, {"fake_quant": "int8", "convert": step.convert}
    return model, {"schedule": "cubic", "target_sparsity": step.sparsity}


def sparsifier(model: nn.Module, step) -> Sparsifier:
    """The mask controller of a magnitude/movement step; its ``on_step`` goes to the training loop."""
    return Sparsifier(model, step.kind, step.sparsity, scope=step.scope, update_every=step.update_every,
                      final_fraction=step.final_fraction)


@dataclass
class Controller:
    """What a step that acts during recovery training needs from the run: a per-step hook for the
    loop (or None) and how to finish after training -> (model, info)."""

    on_step: Callable[[float], None] | None
    finish: Callable[[nn.Module], Result]


def controller(model: nn.Module, step, ctx: CompressContext) -> Controller:
    """Set up a magnitude, movement or qat step on ``model`` before its recovery training."""
    if step.kind == "qat":
        fq = FakeQuant(model)
        return Controller(None, lambda m: fq.finish(m, step.convert, ctx.train, ctx.work_dir,
                                                    step.calibration_examples, ctx.seed))
    masks = sparsifier(model, step)
    return Controller(masks.on_step, lambda m: (m, masks.finalize()))


def _share(model: nn.Module, step: Share, ctx: CompressContext) -> Result:
    groups = share_layers(model, step.mode, step.groups)
    return model, {"mode": step.mode, "groups": groups}


def _svd(model: nn.Module, step: Svd, ctx: CompressContext) -> Result:
    ranks = factorize_roles(model, step.rules())
    return model, {"factorized": len(ranks), "ranks": ranks}


def _embeddings(model: nn.Module, step: FactorizeEmbeddings, ctx: CompressContext) -> Result:
    factorize_embeddings(model, step.rank)
    return model, {"embedding_rank": step.rank}


def _trim_vocab(model: nn.Module, step: TrimVocab, ctx: CompressContext) -> Result:
    if ctx.tokenizer is None or ctx.reencode is None:
        raise ValueError("trim_vocab needs the tokenizer and a way to re-encode the data in its context")
    if "train" in ctx.evals:
        raise ValueError("trim_vocab names the training data 'train'; an eval split has that name too")
    before = model.config.vocab_size

    def encode(tok) -> dict[str, Encoded]:  # the run's own encoding: the windows the model sees
        train, evals = ctx.reencode(tok)
        return {"train": train, **evals}

    out = trim_vocab(model, ctx.tokenizer, {"train": ctx.train, **ctx.evals}, ctx.texts, encode)
    ctx.tokenizer = out.tokenizer
    ctx.train, ctx.evals = out.encodings["train"], {name: out.encodings[name] for name in ctx.evals}
    return out.model, {"vocab_before": before, "vocab_after": out.model.config.vocab_size}


def _onnx_dynamic(model: nn.Module, step: OnnxDynamicInt8, ctx: CompressContext) -> Result:
    seven = reduce_range(step.reduce_range)
    out = dynamic_int8(model, ctx.work_dir, per_channel=step.per_channel, embeddings=step.embeddings,
                       reduce_range=seven)
    return out, {"runtime": "onnxruntime", "int8": "weights" + (" and embeddings" if step.embeddings else "")
                 + (" (7-bit weights)" if seven else "")}


def _onnx_static(model: nn.Module, step: OnnxStaticInt8, ctx: CompressContext) -> Result:
    out = static_int8(model, ctx.train, ctx.work_dir, examples=step.calibration_examples,
                      method=step.calibration_method, per_channel=step.per_channel, seed=ctx.seed,
                      embeddings=step.embeddings, reduce_range=(seven := reduce_range(step.reduce_range)))
    return out, {"runtime": "onnxruntime", "int8": "weights and activations" + (" (7-bit weights)" if seven else "")}


def _openvino(model: nn.Module, step: OpenVino, ctx: CompressContext) -> Result:
    out = openvino_float(model, ctx.work_dir, step.precision, step.embeddings, step.weights)
    stored = [part for part, on in (("weights (stored; widened when compiled)", step.weights == "int8"),
                                    ("embeddings", step.embeddings)) if on]
    return out, {"runtime": "openvino", "precision": out.precision, **({"int8": ", ".join(stored)} if stored else {})}


def _openvino_int8(model: nn.Module, step: OpenVinoInt8, ctx: CompressContext) -> Result:
    out = openvino_int8(model, ctx.train, ctx.work_dir, examples=step.calibration_examples, seed=ctx.seed,
                        precision=step.precision, embeddings=step.embeddings, max_drop=step.max_drop,
                        control_examples=step.control_examples, is_regression=ctx.is_regression,
                        reduce_range=step.reduce_range, head=ctx.head)
    return out, {"runtime": "openvino", "precision": out.precision, "int8": out.quantization}


def _fastest(model: nn.Module, step: FastestRuntime, ctx: CompressContext) -> Result:
    if ctx.timer is None:
        raise ValueError("runtime: fastest needs a timer in its context (the run supplies one)")
    made = {kind: REGISTRY[kind](model, candidate_step(kind, step), sub_context(ctx, kind))
            for kind in step.candidates}
    choice = choose_fastest(model, {k: m for k, (m, _) in made.items()}, ctx.train, ctx.timer, step, ctx.seed,
                            ctx.is_regression, held_out=ctx.evals.get(HOLDOUT), head=ctx.head)
    out, info = made[choice.chosen]
    return out, {**info, "chosen_by": choice.to_dict()}


def _dynamic_int8(model: nn.Module, step: DynamicInt8, ctx: CompressContext) -> Result:
    return model, {"runtime": "torch", "int8": "weights (per channel), activations per batch",
                   "modules": len(quantize_int8_dynamic(model))}


def _int4(model: nn.Module, step: Int4Weight, ctx: CompressContext) -> Result:
    names = quantize_int4(model, step.group_size)
    layers = [model.get_submodule(n) for n in names]
    fp32 = sum(m.in_features * m.out_features * 4 for m in layers)
    packed = sum(m.packed.numel() * m.packed.element_size() + m.scales.numel() * m.scales.element_size()
                 for m in layers)
    return model, {"runtime": "torch", "int4": f"weights, groups of {step.group_size}", "modules": len(names),
                   "linear_weight_bytes_fp32": fp32, "linear_weight_bytes_int4": packed,
                   "linear_weight_fraction": round(packed / fp32, 4)}


def _bf16(model: nn.Module, step: Bf16, ctx: CompressContext) -> Result:
    to_bf16(model)
    return model, {"runtime": "torch", "dtype": "bfloat16"}


REGISTRY: dict[str, Callable[[nn.Module, object, CompressContext], Result]] = {
    "prune_heads": _prune_heads,
    "prune_ffn": _prune_ffn,
    "drop_layers": _drop_layers,
    "magnitude": _scheduled,
    "share": _share,
    "svd": _svd,
    "factorize_embeddings": _embeddings,
    "trim_vocab": _trim_vocab,
    "movement": _scheduled,
    "qat": _scheduled,
    "onnx_dynamic_int8": _onnx_dynamic,
    "onnx_static_int8": _onnx_static,
    "dynamic_int8": _dynamic_int8,
    "int4_weight": _int4,
    "bf16": _bf16,
    "openvino": _openvino,
    "openvino_int8": _openvino_int8,
    "runtime": _fastest,
}


def apply_step(model: nn.Module, step, ctx: CompressContext) -> Result:
    """Run one compression step -> (compressed model, info for the report)."""
    ctx.work_dir.mkdir(parents=True, exist_ok=True)
    return REGISTRY[step.kind](model, step, ctx)
