"""The task's metrics, checked against its eval splits before a run trains: a metric that no model
can get a value on there (:func:`~tinyplm.evaluate.metrics.undefined_reason`) is refused, not
reported as 0.0 for every stage nor left to fail after training; ``tinyplm evaluate`` says such a
metric is undefined instead of printing it."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from tinyplm.errors import DataError
from tinyplm.evaluate.metrics import undefined_reason
from tinyplm.tasks.base import Split, TaskData
from tinyplm.tasks.heads import Head, LabelKind


def _undefined(data: TaskData, limit: int | None) -> Iterator[tuple[str, Split, int, str, str]]:
    """``(split name, split, examples, metric, reason)`` for each metric undefined on an eval split."""
    if Head(data.head).row.labels is not LabelKind.CLASS_OR_SCORE:
        return  # spans, tags, vectors: no class or score per example
    for name, split in data.evals.items():
        references = np.asarray([ex.label for ex in split.examples[:limit] if ex.label is not None])
        for metric in data.metrics:
            if (reason := undefined_reason(metric, references, data.labels)) is not None:
                yield name, split, references.size, metric, reason


def undefined_metrics(data: TaskData) -> dict[str, str]:
    """The metric keys (``metric`` + the split's suffix, as ``evaluate_model`` names them) no model
    can get a value on, each with why."""
    return {metric + data.metric_suffix.get(name, ""): f"undefined on the {name} split: {reason}"
            for name, _, _, metric, reason in _undefined(data, None)}


def check_metrics_defined(data: TaskData, limit: int | None = None) -> None:
    """Raise ``DataError`` naming the split's file, the metric and why, when one of ``data.metrics``
    is undefined on an eval split's labels (one class, one score, one example) whatever is
    predicted. ``limit``: the examples of each split a run evaluates (``task.max_eval_examples``; None:
    all). Heads whose labels are no class or score per example (spans, tags) are not checked."""
    for name, split, size, metric, reason in _undefined(data, limit):
        raise DataError(
            f"{split.source}: the {name} split ({size} example{'s' * (size != 1)}) leaves metric '{metric}' of task "
            f"'{data.task}' undefined whatever a model predicts: {reason}. It would read 0.0 for every "
            "stage and the final model would be chosen on nothing; evaluate on more examples (more rows "
            "in the file, a larger task.max_eval_examples or task.holdout)")
