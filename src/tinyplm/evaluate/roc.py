"""ROC curves of binary classifiers on a dev split, thinned to a few hundred points for reports.

The points come from scikit-learn's ``roc_curve`` on the class-1 probabilities (the scores that
``roc_auc`` is computed from, :func:`~tinyplm.evaluate.metrics.positive_scores`); the curve keeps
its first and last point and an even spread of the rest, so the drawn curve and its area match
the full one closely.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from tinyplm.evaluate.metrics import positive_scores
from tinyplm.models.infer import predict_logits
from tinyplm.tasks.base import TaskData
from tinyplm.tasks.encoding import Encoded
from tinyplm.tasks.heads import Head


@dataclass(frozen=True, kw_only=True)
class RocCurve:
    """A model's ROC curve on one eval ``split``: false and true positive rates (at most a few
    hundred points, both ends kept) and the area under the full curve."""

    split: str
    fpr: list[float]
    tpr: list[float]
    auc: float

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> RocCurve:
        """A curve from results.json (schema 2 and 3 alike; ``split`` absent in a hand-made one: dev)."""
        return cls(split=str(data.get("split", "dev")), fpr=list(data["fpr"]), tpr=list(data["tpr"]),
                   auc=float(data["auc"]))


def roc_points(labels: np.ndarray, scores: np.ndarray, max_points: int = 200) -> dict[str, list[float] | float]:
    """``{"fpr": [...], "tpr": [...], "auc": float}`` of ``scores`` against 0/1 ``labels``,
    at most ``max_points`` points. Raises ``ValueError`` when the labels hold one class only."""
    from sklearn.metrics import roc_auc_score, roc_curve

    labels = np.asarray(labels)
    if len(np.unique(labels)) < 2:
        raise ValueError("a ROC curve needs examples of both classes")
    fpr, tpr, _ = roc_curve(labels, scores)
    keep = np.unique(np.linspace(0, len(fpr) - 1, min(max_points, len(fpr))).round().astype(int))
    return {"fpr": [round(float(x), 5) for x in fpr[keep]], "tpr": [round(float(x), 5) for x in tpr[keep]],
            "auc": float(roc_auc_score(labels, scores))}


def _binary_sentence(data: TaskData) -> bool:
    return not data.is_regression and Head(data.head).row.roc and len(data.labels) == 2


def logits_roc(data: TaskData, evals: dict[str, Encoded], logits: dict[str, torch.Tensor]) -> RocCurve | None:
    """The ROC curve on the first eval split from logits already computed (split name -> logits);
    None for a task that is not binary sentence classification."""
    if not _binary_sentence(data):
        return None
    name, enc = next(iter(evals.items()))
    return RocCurve(split=name, **roc_points(enc.labels.numpy(), positive_scores(logits[name].numpy())))


def model_roc(model: torch.nn.Module, data: TaskData, evals: dict[str, Encoded]) -> RocCurve | None:
    """The ROC curve of ``model`` on the first eval split of a binary sentence task; None for any
    other task (regression, span, token, more than two classes)."""
    if not _binary_sentence(data):
        return None
    name, enc = next(iter(evals.items()))
    return logits_roc(data, {name: enc}, {name: predict_logits(model, enc)})
