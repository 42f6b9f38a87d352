"""``runtime: fastest``: make each candidate final form of a model, time them side by side, keep
the fastest whose accuracy on held-out training examples stays within ``max_drop`` of the PyTorch
model's. The dev split is never used to choose (it is what the report measures)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from tinyplm.config.compress import (
    FastestRuntime,
    OnnxDynamicInt8,
    OnnxStaticInt8,
    OpenVino,
    OpenVinoInt8,
)
from tinyplm.models.infer import logits_to_predictions, predict_logits
from tinyplm.tasks.encoding import Encoded


def candidate_step(kind: str, step: FastestRuntime):
    """The default settings of one candidate, with the step's ``embeddings``, calibration size,
    ``reduce_range`` and (OpenVINO float) ``weights``."""
    emb, rr = step.embeddings, step.reduce_range
    if kind == "onnx_dynamic_int8":
        return OnnxDynamicInt8(kind=kind, embeddings=emb, reduce_range=rr)
    if kind == "onnx_static_int8":
        return OnnxStaticInt8(kind=kind, embeddings=emb, calibration_examples=step.calibration_examples,
                              reduce_range=rr)
    if kind == "openvino":
        return OpenVino(kind=kind, embeddings=emb, weights=step.weights)
    return OpenVinoInt8(kind=kind, embeddings=emb, calibration_examples=step.calibration_examples, reduce_range=rr)


def sub_context(ctx, kind: str):
    """The step context with its own scratch folder for one candidate."""
    work = ctx.work_dir / kind
    work.mkdir(parents=True, exist_ok=True)
    return dataclasses.replace(ctx, work_dir=work)


def control_indices(n: int, calibration: int, control: int, seed: int) -> list[int]:
    """Held-out training examples: after the ``calibration`` first of the seeded permutation that
    calibration (ONNX Runtime static, NNCF) draws from, so the two never overlap."""
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
    held = order[calibration:calibration + control]
    return held or order[:control]


@dataclass(frozen=True)
class Choice:
    """Which candidate was kept, and what every candidate measured."""

    chosen: str
    reference_accuracy: float
    max_drop: float
    examples: int
    candidates: dict[str, dict[str, float]]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _accuracy(model: nn.Module, enc: Encoded, is_regression: bool) -> float:
    """Accuracy on ``enc`` (negative MSE for regression: higher is better either way)."""
    logits = predict_logits(model, enc)
    preds = torch.as_tensor(logits_to_predictions(logits, is_regression))
    if is_regression:
        return -float(((preds - enc.labels.float()) ** 2).mean())
    return float((preds == enc.labels).float().mean())


def choose_fastest(model: nn.Module, candidates: dict[str, nn.Module], train: Encoded,
                   timer: Callable[[dict[str, nn.Module], Encoded], dict[str, float]], step: FastestRuntime,
                   seed: int, is_regression: bool) -> Choice:
    """The fastest candidate within ``step.max_drop`` of ``model``'s held-out accuracy; when none is,
    the most accurate one."""
    held = train.subset(control_indices(len(train), step.calibration_examples, step.control_examples, seed))
    reference = _accuracy(model, held, is_regression)
    speed = timer(candidates, held)
    scores = {k: {"accuracy": round(_accuracy(m, held, is_regression), 5), "sent_per_s": round(speed[k], 1)}
              for k, m in candidates.items()}
    ok = [k for k, v in scores.items() if v["accuracy"] >= reference - step.max_drop]
    pick = (max(ok, key=lambda k: scores[k]["sent_per_s"]) if ok
            else max(scores, key=lambda k: scores[k]["accuracy"]))
    return Choice(pick, round(reference, 5), step.max_drop, len(held), scores)
