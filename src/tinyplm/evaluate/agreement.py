"""How closely a model in another runtime or precision (ONNX Runtime, OpenVINO, int8, bf16)
predicts what its PyTorch parent predicts, on the same encoded examples."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tinyplm.models.infer import logits_to_predictions, predict_logits
from tinyplm.tasks.encoding import Encoded
from tinyplm.tasks.heads import Head, PerHead


@dataclass(frozen=True)
class Agreement:
    """Predictions compared, how many differ, their share that agree, and the largest absolute
    logit difference over real tokens."""

    examples: int
    disagreements: int
    agreement: float
    max_abs_logit_diff: float

    def to_dict(self) -> dict[str, float | int]:
        return {"examples": self.examples, "disagreements": self.disagreements,
                "agreement": round(self.agreement, 5), "max_abs_logit_diff": round(self.max_abs_logit_diff, 6)}


def prediction_agreement(reference, candidate, evals: dict[str, Encoded], is_regression: bool,
                         head: Head = Head.SEQUENCE) -> Agreement:
    """Compare ``candidate`` with ``reference`` on every eval split, by the head's rule (its row's
    ``agreement``, computed by its entry of :data:`COMPARE`). A tagger's predictions are every real
    token's tag; a QA head's are each window's start and end positions; padding positions are left
    out; regression outputs agree within 1e-3. Raises ``TinyplmError`` for a head without logits to
    compare (embedding)."""
    compare = COMPARE[head]
    n, same, worst = 0, 0, 0.0
    for enc in evals.values():
        a, b = predict_logits(reference, enc), predict_logits(candidate, enc)
        count, agreeing, diff = compare(a, b, enc, is_regression)
        n, same, worst = n + count, same + agreeing, max(worst, diff)
    return Agreement(n, n - same, same / max(n, 1), worst)


def _same_label(a: torch.Tensor, b: torch.Tensor, enc: Encoded, is_regression: bool) -> tuple[int, int, float]:
    """(predictions, agreeing, largest |logit difference|) of logits ``(N, K)``: the same arg-max
    class, or scores within 1e-3."""
    pa, pb = logits_to_predictions(a, is_regression), logits_to_predictions(b, is_regression)
    same = int((abs(pa - pb) <= 1e-3).sum()) if is_regression else int((pa == pb).sum())
    return len(pa), same, float((a - b).abs().max()) if len(a) else 0.0


def _same_tags(a: torch.Tensor, b: torch.Tensor, enc: Encoded, is_regression: bool) -> tuple[int, int, float]:
    """As :func:`_same_label` over every real token of logits ``(N, width, tags)``."""
    real = _real(a, enc)
    return _same_label(a[real], b[real], enc, is_regression)  # (tokens, tags): each real token is one prediction


def _same_span(a: torch.Tensor, b: torch.Tensor, enc: Encoded, is_regression: bool) -> tuple[int, int, float]:
    """The same start and the same end position of logits ``(N, width, 2)``; padding can never win."""
    real = _real(a, enc)
    worst = float((a - b).abs()[real].max()) if len(a) else 0.0
    pa = a.masked_fill(~real[..., None], float("-inf")).argmax(1).numpy()
    pb = b.masked_fill(~real[..., None], float("-inf")).argmax(1).numpy()
    return pa.size, int((pa == pb).sum()), worst


def _real(a: torch.Tensor, enc: Encoded) -> torch.Tensor:
    """``(N, width)`` True at the real (not padding) tokens of ``enc``."""
    return torch.arange(a.shape[1])[None, :] < torch.as_tensor(enc.lengths())[:, None]


#: How each head's predictions are compared: (reference logits, candidate logits, encoding, is_regression)
#: -> (predictions, agreeing, largest absolute logit difference over real tokens). The embedding head has no
#: logits: its vectors agree by mean cosine (:func:`tinyplm.evaluate.embedding.embedding_agreement`).
COMPARE: PerHead = PerHead("agreement measure on logits", {Head.SEQUENCE: _same_label, Head.SPAN: _same_span,
                                                           Head.TOKEN: _same_tags})
