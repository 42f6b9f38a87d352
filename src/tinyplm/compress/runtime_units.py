"""What ``runtime: fastest`` compares a candidate and its PyTorch parent on, per head: one value per
*unit*, the candidate's and the parent's side by side with the gold value of each unit.

- sequence: a unit is an example; its value the predicted class (or the score).
- token (tagging): a unit is a labelled word piece (the first piece of each word, as the tags are
  scored); its value the predicted tag. The bounds of ``compress.runtime`` treat the words as
  independent draws, which words of one sentence are not quite: they are the unit the entity
  metric counts, and there are many more of them than sentences.
- span (extractive QA): a unit is a window; its value the pair (start, end) of the highest start and
  end logits among the window's own positions (the window's answer as a start and an end, before
  the decoding to text, which needs the window's metadata a control subset does not carry).
- embedding: a unit is a text; its value the vector (compared by cosine, not by equality).

Each is a :class:`Units`: ``outputs(model, enc, is_regression)`` and ``gold(enc)``, aligned unit by
unit; :data:`UNITS` is the table per head.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import nn

from tinyplm.models.infer import logits_to_predictions, predict_logits
from tinyplm.tasks.encoding import Encoded
from tinyplm.tasks.heads import Head, PerHead
from tinyplm.tasks.tagging import IGNORE

#: Where the control examples a candidate is judged on came from (``compress.runtime.control_set``):
#: the task's held-out examples, or the longest training examples calibration does not use.
ControlSource = Literal["holdout", "longest_training"]


@dataclass(frozen=True)
class Units:
    """How one head's outputs become comparable units: ``outputs(model, enc, is_regression)``
    gives one value per unit (``(U,)``, or ``(U, dim)`` vectors), ``gold(enc)`` the gold value of each
    (``(U,)``; empty where there are no labels), in the same order."""

    outputs: Callable[[nn.Module, Encoded, bool], np.ndarray]
    gold: Callable[[Encoded], np.ndarray]


def _example_outputs(model: nn.Module, enc: Encoded, is_regression: bool) -> np.ndarray:
    """Predictions ``(N,)``: class ids, or regression outputs."""
    return np.asarray(logits_to_predictions(predict_logits(model, enc), is_regression))


def _example_gold(enc: Encoded) -> np.ndarray:
    return enc.labels.numpy()


def vectors(model: nn.Module, enc: Encoded, is_regression: bool) -> np.ndarray:
    """An embedding model's vectors of ``enc``'s texts ``(N, dim)``."""
    return predict_logits(model, enc).numpy()


def _no_gold(enc: Encoded) -> np.ndarray:
    return np.zeros((0,))


def _labelled(enc: Encoded, width: int) -> np.ndarray:
    """The mask ``(N, w)`` of labelled pieces, ``w`` the narrower of ``width`` and the labels'."""
    labels = enc.labels.numpy()
    w = min(width, labels.shape[1])
    return labels[:, :w] != IGNORE


def _tag_outputs(model: nn.Module, enc: Encoded, is_regression: bool) -> np.ndarray:
    """The predicted tag ``(U,)`` of each labelled piece, in example then position order."""
    tags = predict_logits(model, enc).argmax(-1).numpy()  # (N, width)
    mask = _labelled(enc, tags.shape[1])
    return tags[:, : mask.shape[1]][mask]


def _tag_gold(enc: Encoded) -> np.ndarray:
    labels = enc.labels.numpy()
    return labels[labels != IGNORE]


#: One value per (start, end) pair: start * SPAN_BASE + end (wider than any window).
SPAN_BASE = 1 << 20


def _span_outputs(model: nn.Module, enc: Encoded, is_regression: bool) -> np.ndarray:
    """Each window's (start, end) ``(N,)``: the argmax of its start and of its end logits over its
    own positions (the zeros past its end never win)."""
    logits = predict_logits(model, enc)  # (N, width, 2)
    lengths = torch.as_tensor(enc.lengths())
    inside = torch.arange(logits.shape[1])[None, :] < lengths[:, None]
    masked = logits.masked_fill(~inside[..., None], float("-inf"))
    start, end = masked[..., 0].argmax(1), masked[..., 1].argmax(1)
    return (start * SPAN_BASE + end).numpy()


def _span_gold(enc: Encoded) -> np.ndarray:
    labels = enc.labels.long()
    return (labels[:, 0] * SPAN_BASE + labels[:, 1]).numpy()


#: What each head's candidates are compared on (module docstring).
UNITS: PerHead[Units] = PerHead("runtime: fastest comparison", {
    Head.SEQUENCE: Units(_example_outputs, _example_gold),  # a unit: an example
    Head.TOKEN: Units(_tag_outputs, _tag_gold),  # a tagged word
    Head.SPAN: Units(_span_outputs, _span_gold),  # a window
    Head.EMBEDDING: Units(vectors, _no_gold),  # a text
})
