"""SQuAD exact match and F1 with the official evaluation semantics (v1.1 and v2.0).

Answers are normalised as the official scripts do: lower-case, drop ASCII punctuation
(``string.punctuation``), drop the articles *a*, *an*, *the* as whole words, collapse white
space. A question's score is the maximum over its gold answers; scores are percentages.

* v1.1: a question missing from the predictions scores 0 on both (the official script warns).
  F1 is 0 when prediction and gold share no token.
* v2.0: a question whose gold answers all normalise to nothing is unanswerable; its only gold
  answer is the empty string. F1 against an empty answer is 1 when both are empty, else 0.
  Results are also split into ``HasAns_*`` and ``NoAns_*``. A missing prediction is an error in
  v2.0's script; here it is counted as the empty answer and reported in ``missing``.

Written here rather than imported: the official scripts are not packaged, and ``evaluate``'s
SQuAD metrics download their code from the hub at run time, which this machine cannot do.
"""

from __future__ import annotations

import collections
import json
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tinyplm.errors import DataError
from tinyplm.files import read_utf8
from tinyplm.tasks.squad import QAExample
from tinyplm.tasks.squad_features import Prediction

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-case, strip punctuation, drop articles, collapse white space (official order)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _tokens(text: str) -> list[str]:
    return normalize_answer(text).split() if text else []


def exact_match(prediction: str, gold: str) -> int:
    """1 when both normalise to the same string, else 0."""
    return int(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction: str, gold: str, v2: bool = False) -> float:
    """Token-overlap F1 of two answers (v2: an empty side scores 1 only if both are empty)."""
    pred, ref = _tokens(prediction), _tokens(gold)
    if v2 and (not pred or not ref):
        return float(pred == ref)
    same = sum((collections.Counter(pred) & collections.Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True)
class Question:
    """One question's id and gold answer texts (an empty list: unanswerable, v2.0)."""

    id: str
    answers: tuple[str, ...]


def questions(examples: Iterable[QAExample]) -> list[Question]:
    """The scoring view of read examples (``tinyplm.tasks.squad``): id and gold answer texts."""
    return [Question(ex.id, tuple(a.text for a in ex.answers)) for ex in examples]


def squad_scores(questions: Iterable[Question], predictions: Mapping[str, str], v2: bool = False) -> dict[str, float]:
    """``exact_match`` and ``f1`` (percent) over ``questions``; v2 adds HasAns/NoAns splits.

    v1.1 keys: ``exact_match``, ``f1``, ``total``, ``missing``. v2.0 keys follow the official
    script (``exact``, ``f1``, ``total``, ``HasAns_exact``, ...), plus ``missing``.
    """
    em: dict[str, float] = {}
    f: dict[str, float] = {}
    has_answer: dict[str, bool] = {}
    missing = 0
    for q in questions:
        golds = [a for a in q.answers if normalize_answer(a)] if v2 else list(q.answers)
        has_answer[q.id] = bool(q.answers)  # the official split looks at the raw answers
        if v2 and not golds:
            golds = [""]
        if q.id not in predictions:
            missing += 1
            if not v2:
                em[q.id] = f[q.id] = 0.0
                continue
        pred = predictions.get(q.id, "")
        em[q.id] = float(max(exact_match(pred, g) for g in golds)) if golds else 0.0
        f[q.id] = max(f1(pred, g, v2) for g in golds) if golds else 0.0
    total = len(em)
    if not v2:
        return {"exact_match": _pct(em.values(), total), "f1": _pct(f.values(), total), "total": total,
                "missing": missing}
    out = {"exact": _pct(em.values(), total), "f1": _pct(f.values(), total), "total": total}
    for name, flag in (("HasAns", True), ("NoAns", False)):
        ids = [k for k, v in has_answer.items() if v is flag]
        if ids:
            out[f"{name}_exact"] = _pct((em[k] for k in ids), len(ids))
            out[f"{name}_f1"] = _pct((f[k] for k in ids), len(ids))
            out[f"{name}_total"] = len(ids)
    out["missing"] = missing
    return out


def read_predictions(path: Path, ids: Iterable[str]) -> dict[str, str]:
    """A predictions file (a JSON object: question id -> answer text, as ``tinyplm evaluate
    --predictions`` and SQuAD's own script write it; or the JSON lines ``tinyplm predict`` writes,
    one ``{"id", "answer", ...}`` record per question) for the questions ``ids``.

    Raises ``DataError`` naming ``path`` when it is missing, a folder, not UTF-8 JSON, not such an
    object, or when it answers none of ``ids`` (a file of another split or data set would score 0
    with every question missing)."""
    text = read_utf8(Path(path), DataError)
    try:
        preds = json.loads(text)
    except json.JSONDecodeError as exc:
        preds = _predict_lines(text)
        if preds is None:
            raise DataError(f"{path}: not a JSON file ({exc}); expected a JSON object of question ids and answers, "
                            "or the JSON lines tinyplm predict writes") from None
    if not isinstance(preds, dict) or not all(isinstance(v, str) for v in preds.values()):
        raise DataError(f"{path}: expected a JSON object mapping question ids to answer strings")
    known = set(ids)
    if preds and known and not known & set(preds):
        shown = ", ".join(repr(k) for k in list(preds)[:3])
        raise DataError(f"{path}: none of its {len(preds)} question ids (e.g. {shown}) is a question of the data "
                        "file; give the predictions made for that file")
    return preds


def _predict_lines(text: str) -> dict[str, str] | None:
    """The answers of ``tinyplm predict``'s JSON lines (a record per question with its ``id`` and
    ``answer``), or None when ``text`` is not such lines."""
    preds: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            return None
        if not isinstance(record, dict) or not isinstance(record.get("id"), str) or "answer" not in record:
            return None
        preds[record["id"]] = record["answer"]
    return preds or None


def _pct(values: Iterable[float], n: int) -> float:
    return 100.0 * sum(values) / n if n else 0.0


def answers_with_threshold(preds: Sequence[Prediction], threshold: float) -> list[str]:
    """v2.0: the empty answer where ``null_score - score > threshold``, else the span."""
    return ["" if p.null_score - p.score > threshold or not np.isfinite(p.score) else p.text for p in preds]


def best_null_threshold(examples: Sequence[QAExample], preds: Sequence[Prediction]) -> float:
    """The threshold that maximises v2.0 F1 on ``examples`` (tried at every example's gap)."""
    qs = questions(examples)
    gaps = sorted({p.null_score - p.score for p in preds if np.isfinite(p.score)})
    candidates = [min(gaps) - 1.0] + gaps if gaps else [0.0]
    best, best_f1 = 0.0, -1.0
    for t in candidates:
        answers = answers_with_threshold(preds, t)
        f1 = squad_scores(qs, {q.id: a for q, a in zip(qs, answers, strict=True)}, v2=True)["f1"]
        if f1 > best_f1:
            best, best_f1 = t, f1
    return best
