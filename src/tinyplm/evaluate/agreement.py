"""How closely a model in another runtime or precision (ONNX Runtime, OpenVINO, int8, bf16)
predicts what its PyTorch parent predicts, on the same encoded examples."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tinyplm.models.infer import logits_to_predictions, predict_logits
from tinyplm.tasks.encoding import Encoded
from tinyplm.tasks.heads import Head


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
    """Compare ``candidate`` with ``reference`` on every eval split. A tagger's predictions are every
    real token's tag; a QA head's are each window's start and end positions; padding positions are
    left out; regression outputs agree within 1e-3."""
    n, same, worst = 0, 0, 0.0
    for enc in evals.values():
        a, b = predict_logits(reference, enc), predict_logits(candidate, enc)
        if a.dim() == 3:
            real = torch.arange(a.shape[1])[None, :] < torch.as_tensor(enc.lengths())[:, None]
            if head == Head.SPAN:  # (N, width, 2) -> (N, 2) positions; padding can never win
                worst = max(worst, float((a - b).abs()[real].max()) if len(a) else 0.0)
                pa = a.masked_fill(~real[..., None], float("-inf")).argmax(1).numpy()
                pb = b.masked_fill(~real[..., None], float("-inf")).argmax(1).numpy()
                n, same = n + pa.size, same + int((pa == pb).sum())
                continue
            a, b = a[real], b[real]  # (tokens, K): each real token is one prediction
        pa, pb = logits_to_predictions(a, is_regression), logits_to_predictions(b, is_regression)
        n += len(pa)
        same += int((abs(pa - pb) <= 1e-3).sum()) if is_regression else int((pa == pb).sum())
        worst = max(worst, float((a - b).abs().max()) if len(a) else 0.0)
    return Agreement(n, n - same, same / max(n, 1), worst)
