"""The task's metrics, checked against its eval splits before a run trains: a metric that no model
can get a value on there (:func:`~tinyplm.evaluate.metrics.undefined_reason`) is refused, not
reported as 0.0 for every stage nor left to fail after training."""

from __future__ import annotations

import numpy as np

from tinyplm.errors import DataError
from tinyplm.evaluate.metrics import undefined_reason
from tinyplm.tasks.base import TaskData
from tinyplm.tasks.heads import Head, LabelKind


def check_metrics_defined(data: TaskData, limit: int | None = None) -> None:
    """Raise ``DataError`` naming the split's file, the metric and why, when one of ``data.metrics``
    is undefined on an eval split's labels (one class, one score, one example) whatever is
    predicted. ``limit``: the examples of each split a run evaluates (``task.max_eval_examples``; None:
    all). Heads whose labels are no class or score per example (spans, tags) are not checked."""
    if Head(data.head).row.labels is not LabelKind.CLASS_OR_SCORE:
        return
    for name, split in data.evals.items():
        references = np.asarray([ex.label for ex in split.examples[:limit] if ex.label is not None])
        for metric in data.metrics:
            reason = undefined_reason(metric, references, data.labels)
            if reason is not None:
                size = f"{references.size} example{'s' * (references.size != 1)}"
                raise DataError(
                    f"{split.source}: the {name} split ({size}) leaves metric '{metric}' of task "
                    f"'{data.task}' undefined whatever a model predicts: {reason}. It would read 0.0 for every "
                    "stage and the final model would be chosen on nothing; evaluate on more examples (more rows "
                    "in the file, a larger task.max_eval_examples or task.holdout)")
