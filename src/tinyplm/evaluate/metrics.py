"""Task metrics by name: accuracy, f1, f1_macro, mcc, pearson, spearman; and, on the positive
class's score of a binary task, roc_auc, pr_auc and f1_best.

A metric in :data:`SCORE_METRICS` needs scores, not argmax predictions: :func:`compute` takes them
as ``scores`` (the probability of class 1, :func:`positive_scores`) and raises when they are
missing. ``f1_best`` is the F1 of class 1 at the threshold on the score that maximises it on the
split scored (the dev split: "a threshold chosen on dev"); it reports that threshold too, as
``f1_best_threshold``. Computed with scikit-learn and scipy. Every value is a plain Python ``float``. Where a metric is
undefined (constant predictions or references for pearson/spearman/mcc, no positive class for
f1) the value is ``0.0``, not ``nan``, so reports and checkpoint selection never see ``nan``. Where the
references alone make a metric undefined, :func:`undefined_reason` says why (a run refuses such a split).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence

import numpy as np
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import (
    accuracy_score,
    average_precision_score,
    f1_score,
    matthews_corrcoef,
    precision_recall_curve,
    roc_auc_score,
)

from tinyplm.errors import TinyplmError, did_you_mean
from tinyplm.tasks.base import TaskData

MetricFn = Callable[[np.ndarray, np.ndarray], float]
ScoreMetricFn = Callable[[np.ndarray, np.ndarray], dict[str, float]]


def _finite(value: float) -> float:
    """``value`` as a float, with nan/inf (an undefined metric) mapped to 0.0."""
    value = float(value)
    return value if math.isfinite(value) else 0.0


def accuracy(predictions: np.ndarray, references: np.ndarray) -> float:
    """Fraction of predictions equal to the references."""
    return _finite(accuracy_score(references, predictions))


def f1(predictions: np.ndarray, references: np.ndarray) -> float:
    """Binary F1 of class 1 (0.0 when class 1 is never predicted nor present).

    Raises ``TinyplmError`` when the labels are not all 0 or 1 (use f1_macro then).
    """
    found = set(np.unique(references).tolist()) | set(np.unique(predictions).tolist())
    if not found <= {0, 1}:
        raise TinyplmError(f"f1 is binary (labels 0 and 1), found labels {sorted(found)}; "
                           "use f1_macro for more classes")
    return _finite(f1_score(references, predictions, average="binary", pos_label=1,
                            zero_division=0.0))


def f1_macro(predictions: np.ndarray, references: np.ndarray) -> float:
    """Unweighted mean of the per-class F1 over the classes present in either array."""
    return _finite(f1_score(references, predictions, average="macro", zero_division=0.0))


def mcc(predictions: np.ndarray, references: np.ndarray) -> float:
    """Matthews correlation coefficient (CoLA's metric); 0.0 when undefined."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return _finite(matthews_corrcoef(references, predictions))


def _constant(*arrays: np.ndarray) -> bool:
    """True when any array has fewer than two distinct values (correlation is undefined)."""
    return any(a.size < 2 or np.ptp(a) == 0 for a in arrays)


def pearson(predictions: np.ndarray, references: np.ndarray) -> float:
    """Pearson correlation; 0.0 when either array is constant."""
    p, r = predictions.astype(np.float64), references.astype(np.float64)
    if _constant(p, r):
        return 0.0
    return _finite(pearsonr(p, r).statistic)


def spearman(predictions: np.ndarray, references: np.ndarray) -> float:
    """Spearman rank correlation; 0.0 when either array is constant."""
    p, r = predictions.astype(np.float64), references.astype(np.float64)
    if _constant(p, r):
        return 0.0
    return _finite(spearmanr(p, r).statistic)


METRICS: dict[str, MetricFn] = {
    "accuracy": accuracy,
    "f1": f1,
    "f1_macro": f1_macro,
    "mcc": mcc,
    "pearson": pearson,
    "spearman": spearman,
}


def _binary(references: np.ndarray, name: str) -> bool:
    """True when both classes occur (the score metrics are defined); raises ``TinyplmError`` for
    labels other than 0 and 1."""
    found = set(np.unique(references).tolist())
    if not found <= {0, 1}:
        raise TinyplmError(f"{name} scores class 1 of a binary task; found labels {sorted(found)}")
    return len(found) == 2


def roc_auc(scores: np.ndarray, references: np.ndarray) -> dict[str, float]:
    """Area under the ROC curve of the class-1 scores (0.0 when only one class occurs)."""
    return {"roc_auc": _finite(roc_auc_score(references, scores)) if _binary(references, "roc_auc") else 0.0}


def pr_auc(scores: np.ndarray, references: np.ndarray) -> dict[str, float]:
    """Area under the precision-recall curve of class 1 (average precision; 0.0 when undefined)."""
    return {"pr_auc": _finite(average_precision_score(references, scores)) if _binary(references, "pr_auc")
            else 0.0}


def f1_best(scores: np.ndarray, references: np.ndarray) -> dict[str, float]:
    """The best F1 of class 1 over score thresholds on this split, and that threshold (a score is
    predicted as class 1 when ``>= f1_best_threshold``); 0.0 and 0.5 when class 1 is absent."""
    if not _binary(references, "f1_best"):
        return {"f1_best": 0.0, "f1_best_threshold": 0.5}
    precision, recall, thresholds = precision_recall_curve(references, scores)
    with np.errstate(divide="ignore", invalid="ignore"):
        f1s = np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0)[:-1]
    best = int(np.argmax(f1s))
    return {"f1_best": _finite(f1s[best]), "f1_best_threshold": float(thresholds[best])}


SCORE_METRICS: dict[str, ScoreMetricFn] = {"roc_auc": roc_auc, "pr_auc": pr_auc, "f1_best": f1_best}


def undefined_reason(name: str, references: np.ndarray, labels: Sequence[str] = ()) -> str | None:
    """Why metric ``name`` is undefined on ``references`` whatever a model predicts, None where some
    prediction gives it a value: a correlation over fewer than two or equal scores, MCC or a class-1
    score metric over one class, binary F1 without an example of class 1. Such a metric reads 0.0
    for every model (see the module docstring), so a choice made on it is arbitrary. ``labels``
    names the classes in the reason (class indices when empty)."""
    r = np.asarray(references).reshape(-1)
    if r.size == 0:
        return "the split has no labelled example"
    if name in ("pearson", "spearman"):
        if r.size < 2:
            return f"a correlation needs two or more examples, the split has {r.size}"
        return None if np.ptp(r.astype(np.float64)) > 0 else f"every example has the score {float(r[0]):g}"
    classes = sorted(set(np.unique(r).tolist()))
    if name in ("mcc", *SCORE_METRICS) and len(classes) < 2:
        only = labels[classes[0]] if labels and 0 <= classes[0] < len(labels) else classes[0]
        return f"every example has the label {only!r}; {name} compares two classes"
    if name == "f1" and 1 not in classes:
        positive = labels[1] if len(labels) > 1 else 1
        return f"no example has the label {positive!r}, the class f1 scores"
    return None


def needs_scores(names: Sequence[str]) -> bool:
    """True when any of ``names`` is computed from class-1 scores rather than predictions."""
    return any(name in SCORE_METRICS for name in names)


def positive_scores(logits: np.ndarray) -> np.ndarray:
    """The probability of class 1 from ``(batch, 2)`` logits -> ``(batch,)`` float64."""
    array = np.asarray(logits, dtype=np.float64)
    if array.ndim != 2 or array.shape[1] != 2:
        raise TinyplmError(f"class-1 scores need (batch, 2) logits of a binary task, got {array.shape}")
    return 1.0 / (1.0 + np.exp(array[:, 0] - array[:, 1]))  # softmax(logits)[:, 1]


def compute(
    names: Sequence[str],
    predictions: np.ndarray,
    references: np.ndarray,
    suffix: str = "",
    scores: np.ndarray | None = None,
) -> dict[str, float]:
    """``{name + suffix: value}`` for each metric name (``f1_best`` also gives ``f1_best_threshold``).

    ``predictions`` and ``references`` are 1-D, same length: class indices, or float scores
    for pearson/spearman; ``scores`` are class-1 scores for the metrics of :data:`SCORE_METRICS`.
    Raises ``TinyplmError`` for an unknown name, arrays of different lengths, empty arrays, or a
    score metric without scores.
    """
    p = np.asarray(predictions).reshape(-1)
    r = np.asarray(references).reshape(-1)
    if p.shape != r.shape:
        raise TinyplmError(f"{p.size} predictions for {r.size} references")
    if p.size == 0:
        raise TinyplmError("no predictions to score")
    out: dict[str, float] = {}
    for name in names:
        if name in SCORE_METRICS:
            if scores is None or np.asarray(scores).reshape(-1).shape != r.shape:
                raise TinyplmError(f"metric '{name}' needs a class-1 score for each of the {r.size} examples")
            out.update({k + suffix: v for k, v in SCORE_METRICS[name](np.asarray(scores).reshape(-1), r).items()})
            continue
        fn = METRICS.get(name)
        if fn is None:
            known = [*METRICS, *SCORE_METRICS]
            hint = did_you_mean(name, known) or "."
            raise TinyplmError(f"unknown metric '{name}'{hint} Known: {', '.join(known)}")
        out[name + suffix] = fn(p, r)
    return out


def predictions_from_logits(logits: np.ndarray, is_regression: bool) -> np.ndarray:
    """Predictions from model outputs.

    ``logits`` is ``(batch, num_labels)``: classification returns the argmax class ``(batch,)``
    (int64); regression takes ``(batch, 1)`` or ``(batch,)`` and returns scores ``(batch,)``.
    """
    array = np.asarray(logits)
    if is_regression:
        if array.ndim == 2 and array.shape[1] == 1:
            array = array[:, 0]
        if array.ndim != 1:
            raise TinyplmError(f"regression logits must be (batch, 1), got {array.shape}")
        return array.astype(np.float64)
    if array.ndim != 2:
        raise TinyplmError(f"classification logits must be (batch, num_labels), got {array.shape}")
    return array.argmax(axis=-1).astype(np.int64)


def task_metrics(
    data: TaskData, split_name: str, predictions: np.ndarray, references: np.ndarray,
    scores: np.ndarray | None = None,
) -> dict[str, float]:
    """The task's metrics on one split, keys suffixed for that split (MNLI mismatched: "_mm");
    ``scores`` (class-1 scores) are needed when a metric is in :data:`SCORE_METRICS`.

    Raises ``TinyplmError`` when ``split_name`` is neither "train" nor one of ``data.evals``.
    """
    if split_name != "train" and split_name not in data.evals:
        known = ", ".join(["train", *data.evals])
        raise TinyplmError(f"task '{data.task}' has no split '{split_name}'; splits: {known}")
    suffix = data.metric_suffix.get(split_name, "")
    return compute(data.metrics, predictions, references, suffix=suffix, scores=scores)
