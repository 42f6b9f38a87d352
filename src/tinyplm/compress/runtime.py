"""``runtime: fastest``: make each candidate final form of a model, time them side by side, and keep
the fastest one that is shown to predict what its PyTorch parent predicts.

**What the candidates are judged on** (:func:`control_set`): the task's held-out examples when it
has them (``task.holdout``: never trained on, and drawn like the reported split where
``task.holdout_min_words`` asks), all of them; else the ``control_examples`` longest training
examples (in word pieces) that calibration does not use: whole sentences rather than short phrases,
since a quantized model's errors build up over a longer input and SST-2's training set is mostly
phrases while dev holds sentences. The parent was trained on those, so it reads them more surely
than unseen ones: held-out examples are the better control. Dev is never used to choose.

**The rule** (:func:`judge`): two non-inferiority tests on the same examples, each one-sided at
confidence ``1 - ALPHA / k`` for ``k`` candidates (Bonferroni: the chance that any candidate past a
limit passes is at most ``ALPHA``). A candidate passes only if both show it within its limit:

- *flips*: the share of its predictions that differ from the parent's (regression: by more than
  ``flip_tolerance``). Its Wilson score upper bound must be at most ``max_flip``.
- *accuracy drop*: both models score the same examples, so the drop is paired. Of the examples the
  two get differently right, ``b`` the parent gets right and the candidate wrong and ``c`` the
  reverse (McNemar's discordant pairs); the drop is ``(b - c) / n``. Its upper bound is the Wald
  bound after adding 1/2 to each cell of the 2x2 table (Agresti & Min 2005, "Simple improved
  confidence intervals for comparing matched proportions"), which keeps its coverage with few
  discordant pairs, where the plain Wald bound is 0. Regression: the increase of the mean squared
  error, bounded by the normal bound of the paired mean. It must be at most ``max_drop``.

So a candidate whose accuracy is within ``max_drop`` on too few examples to tell is refused, and a
candidate that keeps accuracy by trading right answers for others (flips with ``b`` close to
``c``) is refused by its flips. The fastest candidate that passes is kept; when none does, the one
that flips fewest predictions (then the smaller drop bound, then the faster), and the choice says
that it is not within the limits. Each refused candidate's record says why.

**Embedding models** (:func:`~tinyplm.compress.runtime_vectors.judge_vectors`) have no labels or
predictions to flip: a candidate's vectors of the control texts are compared with its parent's, text
by text, and the lower confidence bound of their mean cosine (normal bound of the mean, at the same
Bonferroni confidence) must be at least ``min_cosine``. When none passes, the one of highest bound
is kept. The choice (:class:`VectorChoice`) records each candidate's mean cosine and bound. Which
rule a head follows is the table :data:`RULES`. The bounds are in
:mod:`tinyplm.compress.runtime_bounds`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TypedDict

import numpy as np
import torch
from torch import nn

from tinyplm.compress.runtime_bounds import mean_upper, paired_drop_upper, wilson_upper
from tinyplm.compress.runtime_units import UNITS, ControlSource, Units
from tinyplm.compress.runtime_vectors import MeasuredVectors, VectorChoice, judge_vectors
from tinyplm.config.compress import (
    FastestRuntime,
    OnnxDynamicInt8,
    OnnxStaticInt8,
    OpenVino,
    OpenVinoInt8,
)
from tinyplm.tasks.encoding import Encoded
from tinyplm.tasks.heads import Head, PerHead

#: The chance, shared by all candidates, that one past a limit is kept (one-sided tests).
ALPHA = 0.05


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


def control_indices(n: int, calibration: int, control: int, seed: int,
                    lengths: Sequence[int] | None = None) -> list[int]:
    """``control`` training examples that calibration (ONNX Runtime static, NNCF) does not use: it
    draws the ``calibration`` first of a seeded permutation, these come from the rest (from all, if
    calibration takes every example). With ``lengths`` (each example's length), the longest of
    them, ties in the permutation's order; else the next ones in it."""
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
    rest = order[calibration:] or order
    if lengths is not None:
        rest = sorted(rest, key=lambda i: -int(lengths[i]))  # stable: equal lengths keep the seeded order
    return rest[:control]


def control_set(train: Encoded, held_out: Encoded | None, step: FastestRuntime,
                seed: int) -> tuple[Encoded, ControlSource]:
    """The examples candidates are judged and timed on, and where they came from: every held-out
    example when there are any, else the ``step.control_examples`` longest training examples
    outside calibration (see the module docstring)."""
    if held_out is not None and len(held_out):
        return held_out, "holdout"
    idx = control_indices(len(train), step.calibration_examples, step.control_examples, seed, train.lengths())
    return train.rows(idx), "longest_training"


@dataclass(frozen=True)
class Verdict:
    """How one candidate compares with its parent on the control examples: its ``accuracy``
    (negative MSE for regression), how many predictions it ``flipped`` and the share's upper bound,
    its accuracy ``drop`` (MSE increase) and that drop's upper bound, and why it was ``refused``
    (None when it passed)."""

    accuracy: float
    flipped: int
    flip_bound: float
    drop: float
    drop_bound: float
    refused: str | None


class Measured(TypedDict):
    """What a :class:`Choice` records of one candidate: its :class:`Verdict` and its speed."""

    accuracy: float
    sent_per_s: float
    flipped: int
    flip_bound: float
    drop: float
    drop_bound: float
    refused: str | None


@dataclass(frozen=True)
class Choice:
    """Which candidate was kept and why: the parent's accuracy, the limits, the ``examples`` judged
    on and where they came from (``control``), the one-sided ``confidence`` of each bound, whether
    the kept one passed (``within_limits``), and what every candidate measured."""

    chosen: str
    reference_accuracy: float
    max_drop: float
    max_flip: float
    examples: int
    control: ControlSource
    confidence: float
    within_limits: bool
    candidates: dict[str, Measured]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _accuracy(preds: np.ndarray, labels: np.ndarray, is_regression: bool) -> float:
    """Accuracy, or negative MSE for regression (higher is better either way)."""
    return -float(((preds - labels) ** 2).mean()) if is_regression else float((preds == labels).mean())


def judge(reference: np.ndarray, candidate: np.ndarray, labels: np.ndarray, step: FastestRuntime, z: float,
          is_regression: bool) -> Verdict:
    """Test one candidate's predictions ``candidate`` (N,) against its parent's ``reference`` (N,)
    on examples labelled ``labels`` (N,), with ``z`` the normal quantile of each bound's confidence
    (rule: module docstring). Raises ``ValueError`` for no examples."""
    n = len(reference)
    if n == 0:
        raise ValueError("runtime: fastest has no examples to judge its candidates on")
    if is_regression:
        flipped = int((np.abs(candidate - reference) > step.flip_tolerance).sum())
        diffs = (candidate - labels) ** 2 - (reference - labels) ** 2
        drop, drop_bound, lost_none = float(diffs.mean()), mean_upper(diffs, z), False
    else:
        flipped = int((candidate != reference).sum())
        ref_ok, cand_ok = reference == labels, candidate == labels
        b, c = int((ref_ok & ~cand_ok).sum()), int((~ref_ok & cand_ok).sum())  # McNemar's discordant pairs
        drop, drop_bound, lost_none = (b - c) / n, paired_drop_upper(b, c, n, z), b == 0
    flip_bound = wilson_upper(flipped, n, z)
    accuracy = _accuracy(candidate, labels, is_regression)
    at = f"at {NormalDist().cdf(z):.1%} confidence"
    reasons = []
    if flip_bound > step.max_flip:
        reasons.append(_flip_reason(flipped, n, flip_bound, step.max_flip, at))
    if drop_bound > step.max_drop:
        reasons.append(_drop_reason(accuracy, accuracy + drop, drop_bound, step.max_drop, n, at, is_regression,
                                    lost_none))
    return Verdict(round(accuracy, 5), flipped, round(flip_bound, 5), round(drop, 5), round(drop_bound, 5),
                   "; ".join(reasons) or None)


#: What a refusal on too few examples advises.
MORE = "more examples are needed (task.holdout, or control_examples without it)"


def _flip_reason(flipped: int, n: int, bound: float, limit: float, at: str) -> str:
    if flipped == 0:
        return (f"flips none of {n} predictions, but {n} examples cannot show a share under max_flip {limit:.2%} "
                f"(bound {bound:.2%} {at}): {MORE}")
    return (f"flips {flipped} of {n} predictions of its parent ({flipped / n:.2%}; up to {bound:.2%} {at}), "
            f"more than max_flip {limit:.2%}")


def _drop_reason(accuracy: float, parent: float, bound: float, limit: float, n: int, at: str, is_regression: bool,
                 lost_none: bool) -> str:
    if is_regression:
        return (f"mean squared error {-accuracy:.4f} against the parent's {-parent:.4f} on {n} examples: up to "
                f"{bound:.4f} more {at}, more than max_drop {limit}")
    if lost_none:
        return (f"loses none of the parent's right answers, but {n} examples cannot show a drop under max_drop "
                f"{limit} (bound {bound:.4f} {at}): {MORE}")
    return (f"accuracy {accuracy:.4f} against the parent's {parent:.4f} on {n} examples: a drop of up to "
            f"{bound:.4f} {at}, more than max_drop {limit}")


# ---------------------------------------------------------------------------------------------
# the choice


def by_vectors(j: Judged) -> VectorChoice:
    """The embedding head's rule: :func:`judge_vectors` on each candidate; the fastest that passes,
    else the one of highest cosine bound (then the faster)."""
    scores: dict[str, MeasuredVectors] = {}
    for kind, out in j.outputs.items():
        v = judge_vectors(j.reference, out, j.step, j.z)
        scores[kind] = MeasuredVectors(mean_cosine=v.mean_cosine, cosine_bound=v.cosine_bound,
                                       sent_per_s=round(j.speed[kind], 1), refused=v.refused)
    ok = [k for k, v in scores.items() if v["refused"] is None]
    pick = (max(ok, key=lambda k: scores[k]["sent_per_s"]) if ok
            else max(scores, key=lambda k: (scores[k]["cosine_bound"], scores[k]["sent_per_s"])))
    return VectorChoice(pick, j.step.min_cosine, len(j.held), j.source, j.confidence, bool(ok), scores)


def _by_predictions(j: Judged) -> Choice:
    """The classifiers' rule (module docstring): :func:`judge` on each candidate's predictions, unit
    by unit (an example, a tagged word, a window: ``runtime_units``)."""
    labels = j.gold
    scores: dict[str, Measured] = {}
    for kind, out in j.outputs.items():
        v = judge(j.reference, out, labels, j.step, j.z, j.is_regression)
        scores[kind] = Measured(accuracy=v.accuracy, sent_per_s=round(j.speed[kind], 1), flipped=v.flipped,
                                flip_bound=v.flip_bound, drop=v.drop, drop_bound=v.drop_bound, refused=v.refused)
    ok = [k for k, v in scores.items() if v["refused"] is None]
    pick = (max(ok, key=lambda k: scores[k]["sent_per_s"]) if ok
            else min(scores, key=lambda k: (scores[k]["flipped"], scores[k]["drop_bound"], -scores[k]["sent_per_s"])))
    return Choice(pick, round(_accuracy(j.reference, labels, j.is_regression), 5), j.step.max_drop, j.step.max_flip,
                  len(j.reference), j.source, j.confidence, bool(ok), scores)


@dataclass(frozen=True)
class Judged:
    """What a head's rule decides on: the parent's ``reference`` outputs and each candidate's
    ``outputs`` on the ``held`` control examples (from ``source``), one per unit with its ``gold``
    value (``runtime_units``), each candidate's ``speed``
    (sentences/s), the step, ``z`` (the normal quantile of each bound's confidence) and whether the
    task predicts a score."""

    reference: np.ndarray
    outputs: dict[str, np.ndarray]
    gold: np.ndarray
    held: Encoded
    source: ControlSource
    speed: dict[str, float]
    step: FastestRuntime
    z: float
    is_regression: bool

    @property
    def confidence(self) -> float:
        """The one-sided confidence of each bound."""
        return round(1 - ALPHA / len(self.outputs), 4)


@dataclass(frozen=True)
class Rule:
    """How one head's candidates are compared with their parent: ``units`` says what is compared
    (one value per example, tagged word or window; a vector per text), ``decide`` the choice."""

    units: Units
    decide: Callable[[Judged], Choice | VectorChoice]


#: The rule each head's candidates are judged by: classifiers by their predictions (flips and
#: accuracy drop), embedding models by their vectors (mean cosine; module docstring).
RULES: PerHead[Rule] = PerHead("runtime: fastest rule", {
    Head.SEQUENCE: Rule(UNITS[Head.SEQUENCE], _by_predictions), Head.SPAN: Rule(UNITS[Head.SPAN], _by_predictions),
    Head.TOKEN: Rule(UNITS[Head.TOKEN], _by_predictions), Head.EMBEDDING: Rule(UNITS[Head.EMBEDDING], by_vectors)})


def choose_fastest(model: nn.Module, candidates: dict[str, nn.Module], train: Encoded,
                   timer: Callable[[dict[str, nn.Module], Encoded], dict[str, float]], step: FastestRuntime,
                   seed: int, is_regression: bool, held_out: Encoded | None = None,
                   head: Head = Head.SEQUENCE) -> Choice | VectorChoice:
    """The fastest of ``candidates`` (final forms of ``model``) that passes ``head``'s rule
    (:data:`RULES`) against ``model`` on the control examples (``held_out``, the task's held-out
    examples, when given; else from ``train``); when none does, the one closest to ``model``.
    Raises ``ValueError`` when there is no candidate or no example to judge on, ``TinyplmError``
    for an unknown head."""
    if not candidates:
        raise ValueError("runtime: fastest has no candidates to choose among (step field 'candidates')")
    rule = RULES[head]
    held, source = control_set(train, held_out, step, seed)
    z = NormalDist().inv_cdf(1 - ALPHA / len(candidates))
    reference = rule.units.outputs(model, held, is_regression)
    speed = timer(candidates, held)
    outputs = {kind: rule.units.outputs(m, held, is_regression) for kind, m in candidates.items()}
    return rule.decide(Judged(reference, outputs, rule.units.gold(held), held, source, speed, step, z, is_regression))
