"""The typed seams of prediction: what goes into a :class:`~tinyplm.inference.predictor.Predictor` and
what comes out, one pair per head (:class:`~tinyplm.tasks.heads.Head`).

- ``sequence``: :class:`TextInput` (a text, optionally with a second text) -> :class:`LabelPrediction`
  (the label and the probability of every label) or, for a regression model, :class:`ValuePrediction`.
- ``span``: :class:`QAInput` (a question on a context) -> :class:`AnswerPrediction` (the answer text
  and its character offsets in the context).
- ``token``: :class:`TokensInput` (a sentence split into words) -> :class:`TagsPrediction` (one tag
  per word).
- ``embedding``: :class:`TextInput` (a text alone) -> :class:`VectorPrediction` (the text's vector).

The record class names of each head are its row's ``records`` (:data:`tinyplm.tasks.heads.HEADS`).

File readers (``predict.inputs``, over the readers training uses: ``tasks.readers``) and the HTTP
API (``serve.api``) build inputs; the writers
(``predict.writers``) and the API turn predictions into records with :meth:`as_dict`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tinyplm.tasks.heads import Head, PerHead


@dataclass(frozen=True)
class TextInput:
    """One example of a sequence task: ``text`` and, for pair tasks, ``text_pair``."""

    text: str
    text_pair: str | None = None

    @property
    def size(self) -> int:
        """Characters in all (a cheap proxy for the token count, used to group similar lengths)."""
        return len(self.text) + len(self.text_pair or "")


@dataclass(frozen=True)
class QAInput:
    """One question on one context; ``id`` is echoed in the prediction."""

    question: str
    context: str
    id: str | None = None

    @property
    def size(self) -> int:
        return len(self.question) + len(self.context)


@dataclass(frozen=True)
class TokensInput:
    """One sentence as words (the tagger predicts one tag per word)."""

    tokens: tuple[str, ...]

    @property
    def size(self) -> int:
        return sum(len(t) + 1 for t in self.tokens)


Input = TextInput | QAInput | TokensInput

#: The input type each head takes (an embedding model reads a text alone: a ``TextInput`` without pair).
INPUT_OF: PerHead = PerHead("prediction input", {Head.SEQUENCE: TextInput, Head.SPAN: QAInput,
                                                 Head.TOKEN: TokensInput, Head.EMBEDDING: TextInput})


@dataclass(frozen=True)
class LabelPrediction:
    """A classifier's answer: the arg-max ``label`` (its name, e.g. ``positive``), its class index
    ``label_id`` (the model's output position, as ``id2label`` maps it) and the softmax probability
    of every label, by name."""

    label: str
    label_id: int
    scores: dict[str, float]

    def as_dict(self) -> dict:
        return {"label": self.label, "label_id": self.label_id, "scores": self.scores}


@dataclass(frozen=True)
class ValuePrediction:
    """A regression model's output."""

    value: float

    def as_dict(self) -> dict:
        return {"value": self.value}


@dataclass(frozen=True)
class AnswerPrediction:
    """The best answer span: its text, character offsets ``[start, end)`` in the context (``-1``
    and an empty text when no span qualified, or, for SQuAD v2.0 models, when "no answer" wins),
    its start + end logit score and the no-answer score."""

    answer: str
    start: int
    end: int
    score: float
    null_score: float
    id: str | None = None

    def as_dict(self) -> dict:
        """JSON-able: a score that is not finite (no span qualified) is ``None``."""
        out = {"answer": self.answer, "start": self.start, "end": self.end, "score": _finite(self.score),
               "null_score": _finite(self.null_score)}
        return {"id": self.id, **out} if self.id is not None else out


@dataclass(frozen=True)
class TagsPrediction:
    """One tag per word of the sentence (a sentence longer than the model's max length is read in
    overlapping windows of words: ``Predictor._tags``)."""

    tokens: tuple[str, ...]
    tags: tuple[str, ...]

    def as_dict(self) -> dict:
        return {"tokens": list(self.tokens), "tags": list(self.tags)}


@dataclass(frozen=True)
class VectorPrediction:
    """An embedding model's vector of one text ``(dim,)``; ``tokens``: the text's token count before
    any cut to the model's limit (0: not counted), for the service's truncation rule and usage."""

    vector: tuple[float, ...]
    tokens: int = 0

    def as_dict(self) -> dict:
        return {"vector": list(self.vector)}


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


Prediction = LabelPrediction | ValuePrediction | AnswerPrediction | TagsPrediction | VectorPrediction
