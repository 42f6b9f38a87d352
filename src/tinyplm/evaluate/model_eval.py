"""Task metrics of a model on every eval split of a task."""

from __future__ import annotations

import torch

from tinyplm.evaluate.metrics import task_metrics
from tinyplm.models.infer import logits_to_predictions, predict_logits
from tinyplm.tasks.base import TaskData
from tinyplm.tasks.encoding import Encoded, encode_split


def encode_evals(data: TaskData, tokenizer, max_length: int, limit: int | None = None) -> dict[str, Encoded]:
    """Tokenise every eval split of ``data`` (first ``limit`` examples each when given)."""
    return {name: encode_split(split, tokenizer, max_length, limit) for name, split in data.evals.items()}


def evaluate_model(
    model: torch.nn.Module,
    data: TaskData,
    evals: dict[str, Encoded],
    bf16: bool = False,
    batch_size: int = 64,
) -> dict[str, float]:
    """Official metrics on every eval split, merged (MNLI: accuracy and accuracy_mm)."""
    metrics: dict[str, float] = {}
    for name, enc in evals.items():
        logits = predict_logits(model, enc, batch_size=batch_size, bf16=bf16)
        preds = logits_to_predictions(logits, data.is_regression)
        metrics.update(task_metrics(data, name, preds, enc.labels.numpy()))
    return metrics
