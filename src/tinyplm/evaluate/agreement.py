"""How closely a model in another runtime or precision (ONNX Runtime, OpenVINO, int8, bf16)
predicts what its PyTorch parent predicts, on the same encoded examples."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tinyplm.evaluate.embedding import embedding_agreement
from tinyplm.models.infer import logits_to_predictions, predict_logits
from tinyplm.tasks.encoding import Encoded
from tinyplm.tasks.heads import Head, PerHead

#: The embedding head: a text whose two vectors have a cosine under this counts as a disagreement.
SAME_VECTOR = 0.99


@dataclass(frozen=True)
class Agreement:
    """Predictions compared, how many differ, their share that agree, and the largest absolute
    logit difference over real tokens; for the embedding head ``mean_cosine``, the mean cosine of
    the two models' vectors (then also ``agreement``)."""

    examples: int
    disagreements: int
    agreement: float
    max_abs_logit_diff: float
    mean_cosine: float | None = None

    def to_dict(self) -> dict[str, float | int]:
        out = {"examples": self.examples, "disagreements": self.disagreements,
               "agreement": round(self.agreement, 5), "max_abs_logit_diff": round(self.max_abs_logit_diff, 6)}
        if self.mean_cosine is not None:
            out["mean_cosine"] = round(self.mean_cosine, 6)
        return out


@dataclass(frozen=True)
class Tally:
    """One split compared: ``count`` predictions, ``agreeing`` of them, the largest absolute output
    difference ``worst``; ``cosine_sum``, the sum of the vectors' cosines (the embedding head only)."""

    count: int
    agreeing: int
    worst: float
    cosine_sum: float | None = None


def prediction_agreement(reference, candidate, evals: dict[str, Encoded], is_regression: bool,
                         head: Head = Head.SEQUENCE) -> Agreement:
    """Compare ``candidate`` with ``reference`` on every eval split, by the head's rule (its row's
    ``agreement``, computed by its entry of :data:`COMPARE`). A tagger's predictions are every real
    token's tag; a QA head's are each window's start and end positions; padding positions are left
    out; regression outputs agree within 1e-3. The embedding head compares each text's two vectors:
    ``agreement`` and ``mean_cosine`` are their mean cosine over every split's texts,
    ``disagreements`` the texts whose cosine is under :data:`SAME_VECTOR` (0.99). Raises
    ``TinyplmError`` for an unknown head."""
    compare = COMPARE[head]
    tallies = []
    for enc in evals.values():
        if len(enc):
            tallies.append(compare(predict_logits(reference, enc), predict_logits(candidate, enc), enc, is_regression))
    n, same = sum(t.count for t in tallies), sum(t.agreeing for t in tallies)
    worst = max((t.worst for t in tallies), default=0.0)
    cosines = [t.cosine_sum for t in tallies if t.cosine_sum is not None]
    mean_cosine = sum(cosines) / max(n, 1) if cosines else None
    return Agreement(n, n - same, mean_cosine if mean_cosine is not None else same / max(n, 1), worst, mean_cosine)


def _same_label(a: torch.Tensor, b: torch.Tensor, enc: Encoded, is_regression: bool) -> Tally:
    """Logits ``(N, K)`` agree on the same arg-max class, or scores within 1e-3."""
    pa, pb = logits_to_predictions(a, is_regression), logits_to_predictions(b, is_regression)
    same = int((abs(pa - pb) <= 1e-3).sum()) if is_regression else int((pa == pb).sum())
    return Tally(len(pa), same, float((a - b).abs().max()) if len(a) else 0.0)


def _same_tags(a: torch.Tensor, b: torch.Tensor, enc: Encoded, is_regression: bool) -> Tally:
    """As :func:`_same_label` over every real token of logits ``(N, width, tags)``."""
    real = _real(a, enc)
    return _same_label(a[real], b[real], enc, is_regression)  # (tokens, tags): each real token is one prediction


def _same_span(a: torch.Tensor, b: torch.Tensor, enc: Encoded, is_regression: bool) -> Tally:
    """The same start and the same end position of logits ``(N, width, 2)``; padding can never win."""
    real = _real(a, enc)
    worst = float((a - b).abs()[real].max()) if len(a) else 0.0
    pa = a.masked_fill(~real[..., None], float("-inf")).argmax(1).numpy()
    pb = b.masked_fill(~real[..., None], float("-inf")).argmax(1).numpy()
    return Tally(pa.size, int((pa == pb).sum()), worst)


def _same_vectors(a: torch.Tensor, b: torch.Tensor, enc: Encoded, is_regression: bool) -> Tally:
    """Vectors ``(N, dim)``: their mean cosine (:func:`~tinyplm.evaluate.embedding.embedding_agreement`),
    counted as a sum over the ``N`` texts, which agree where the cosine is at least :data:`SAME_VECTOR`."""
    cosines = torch.nn.functional.cosine_similarity(a.double(), b.double(), dim=1)  # (N,)
    return Tally(len(a), int((cosines >= SAME_VECTOR).sum()), float((a - b).abs().max()),
                 embedding_agreement(a.numpy(), b.numpy()) * len(a))


def _real(a: torch.Tensor, enc: Encoded) -> torch.Tensor:
    """``(N, width)`` True at the real (not padding) tokens of ``enc``."""
    return torch.arange(a.shape[1])[None, :] < torch.as_tensor(enc.lengths())[:, None]


#: How each head's outputs are compared: (reference outputs, candidate outputs, encoding, is_regression)
#: -> a :class:`Tally`: logits by the predictions they make, an embedding model's vectors by cosine.
COMPARE: PerHead = PerHead("agreement measure", {Head.SEQUENCE: _same_label, Head.SPAN: _same_span,
                                                 Head.TOKEN: _same_tags, Head.EMBEDDING: _same_vectors})
