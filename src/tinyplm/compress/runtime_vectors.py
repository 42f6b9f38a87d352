"""``runtime: fastest`` for embedding models (:mod:`tinyplm.compress.runtime`): a candidate has no
labels or predictions to flip, so its vectors of the control texts are compared with its parent's,
text by text, and the lower confidence bound of their mean cosine must be at least ``min_cosine``.
The rule that picks among them, :func:`~tinyplm.compress.runtime.by_vectors`, keeps the fastest
that passes, else the one of highest bound; :class:`VectorChoice` records each candidate's mean
cosine and bound.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from statistics import NormalDist
from typing import TypedDict

import numpy as np

from tinyplm.compress.runtime_bounds import mean_lower
from tinyplm.compress.runtime_units import ControlSource
from tinyplm.config.compress import FastestRuntime


def row_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The cosine of row i of ``a`` with row i of ``b`` ``(N, dim)`` -> ``(N,)`` float64; 0 where
    either row is zero."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.where(norms > 0, np.einsum("ij,ij->i", a, b) / np.where(norms > 0, norms, 1.0), 0.0)


@dataclass(frozen=True)
class VectorVerdict:
    """How one candidate's vectors compare with its parent's on the control texts: their
    ``mean_cosine``, its lower bound ``cosine_bound`` (at least -1), and why it was ``refused``
    (None when it passed)."""

    mean_cosine: float
    cosine_bound: float
    refused: str | None


class MeasuredVectors(TypedDict):
    """What a :class:`VectorChoice` records of one candidate: its :class:`VectorVerdict` and its speed."""

    mean_cosine: float
    cosine_bound: float
    sent_per_s: float
    refused: str | None


@dataclass(frozen=True)
class VectorChoice:
    """An embedding model's :class:`Choice`: which candidate was kept, the limit ``min_cosine``, the
    ``examples`` (texts) judged on and where they came from, the one-sided ``confidence`` of each
    bound, whether the kept one passed, and what every candidate measured."""

    chosen: str
    min_cosine: float
    examples: int
    control: ControlSource
    confidence: float
    within_limits: bool
    candidates: dict[str, MeasuredVectors]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def judge_vectors(reference: np.ndarray, candidate: np.ndarray, step: FastestRuntime, z: float) -> VectorVerdict:
    """Test one candidate's vectors ``candidate`` against its parent's ``reference`` ``(N, dim)``
    on the same texts: the lower confidence bound (``z``) of their mean cosine must be at least
    ``step.min_cosine``. Raises ``ValueError`` for no texts or vectors of another shape."""
    if len(reference) == 0:
        raise ValueError("runtime: fastest has no texts to judge its candidates on")
    if np.shape(candidate) != np.shape(reference):
        raise ValueError(f"runtime: fastest: a candidate gives vectors of shape {np.shape(candidate)}, its parent "
                         f"{np.shape(reference)}")
    cosines = row_cosines(reference, candidate)
    n, mean, bound = len(cosines), float(cosines.mean()), max(-1.0, mean_lower(cosines, z))
    at = f"at {NormalDist().cdf(z):.1%} confidence"
    refused = None
    if bound < step.min_cosine and mean >= step.min_cosine:
        refused = (f"mean cosine {mean:.4f} to its parent's vectors on {n} texts, but {n} texts cannot show it "
                   f"at least min_cosine {step.min_cosine} (bound {bound:.4f} {at}): more texts are needed "
                   "(control_examples)")
    elif bound < step.min_cosine:
        refused = (f"mean cosine {mean:.4f} to its parent's vectors on {n} texts: down to {bound:.4f} {at}, under "
                   f"min_cosine {step.min_cosine}")
    return VectorVerdict(round(mean, 6), round(bound, 6), refused)
