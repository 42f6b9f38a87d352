"""Task metrics of a model on every eval split of a task.

Sequence tasks compare argmax classes (or scores) with labels; a task whose metrics need scores
(ROC AUC ...: ``metrics.needs_scores``) also gets each example's class-1 probability. Span tasks
(SQuAD) turn window logits into answer texts (n-best, maximum answer length) and score them with
the official EM/F1; token tasks (CoNLL-2003) read the tag at each word's first piece and score
entities. An embedding model's outputs are its vectors ``(N, dim)``, one per distinct text of an eval
set, scored on the set's pairs or queries (:func:`tinyplm.evaluate.embedding.set_metrics`).
"""

from __future__ import annotations

import torch

from tinyplm.evaluate.entities import entity_scores
from tinyplm.evaluate.metrics import needs_scores, positive_scores, task_metrics
from tinyplm.models.finite import refuse_nan_outputs
from tinyplm.models.infer import logits_to_predictions, predict_logits
from tinyplm.tasks.base import Split, TaskData
from tinyplm.tasks.encoding import Encoded, encode_split
from tinyplm.tasks.heads import Head, PerHead


def encode_evals(data: TaskData, tokenizer, max_length: int, limit: int | None = None) -> dict[str, Encoded]:
    """Tokenise every eval split of ``data`` (first ``limit`` examples each when given)."""
    return {name: encode_split(split, tokenizer, max_length, limit) for name, split in data.evals.items()}


def evaluate_model(
    model: torch.nn.Module,
    data: TaskData,
    evals: dict[str, Encoded],
    bf16: bool = False,
    batch_size: int = 64,
) -> dict[str, float]:
    """Official metrics on every eval split, merged (MNLI: accuracy and accuracy_mm)."""
    return metrics_from_logits(data, evals, eval_logits(model, evals, bf16, batch_size))


def eval_logits(model: torch.nn.Module, evals: dict[str, Encoded], bf16: bool = False,
                batch_size: int = 64) -> dict[str, torch.Tensor]:
    """The model's logits on every eval split (split name -> logits)."""
    return {name: predict_logits(model, enc, batch_size=batch_size, bf16=bf16) for name, enc in evals.items()}


def metrics_from_logits(data: TaskData, evals: dict[str, Encoded], logits: dict[str, torch.Tensor]) -> dict[str, float]:
    """Official metrics of :func:`eval_logits`' output on every eval split, merged (each head's by
    its entry of :data:`SPLIT_METRICS`); :class:`~tinyplm.models.finite.NanOutputs` naming the split
    and its examples where an output is NaN (scored, it would read as the first class)."""
    metrics: dict[str, float] = {}
    for name, enc in evals.items():
        refuse_nan_outputs(logits[name], f"task {data.task}, split {name}")
        metrics.update(SPLIT_METRICS[enc.head](data, name, enc, logits[name]))
    return metrics


def _sequence_metrics(data: TaskData, name: str, enc: Encoded, logits: torch.Tensor) -> dict[str, float]:
    """Classes (or scores) against labels, and the class-1 probability where a metric needs it."""
    preds = logits_to_predictions(logits, data.is_regression)
    probs = positive_scores(logits.numpy()) if needs_scores(data.metrics) else None
    return task_metrics(data, name, preds, enc.labels.numpy(), probs)


def _span_metrics(data: TaskData, name: str, enc: Encoded, logits: torch.Tensor) -> dict[str, float]:
    return _suffixed(data, name, span_scores(data.evals[name], enc, logits))


def _token_metrics(data: TaskData, name: str, enc: Encoded, logits: torch.Tensor) -> dict[str, float]:
    return _suffixed(data, name, token_scores(data.evals[name], enc, logits, data.labels))


def _embedding_metrics(data: TaskData, name: str, enc: Encoded, vectors: torch.Tensor) -> dict[str, float]:
    """The set's similarity or retrieval metrics from the vectors of its distinct texts (the split's
    examples, :func:`tinyplm.tasks.retrieval.embedding_split`), compared as ``data.similarity`` says."""
    from tinyplm.evaluate.embedding import set_metrics
    from tinyplm.evaluate.similarity import similarity_of
    from tinyplm.tasks.retrieval import SET_OPTION

    split = data.evals[name]
    texts = [ex.text for ex in split.examples[: len(enc)]]
    similarity = similarity_of(data.similarity, f"task {data.task}: similarity")
    return _suffixed(data, name, set_metrics(split.options[SET_OPTION], texts, vectors.numpy(), similarity))


def _suffixed(data: TaskData, name: str, scores: dict[str, float]) -> dict[str, float]:
    suffix = data.metric_suffix.get(name, "")
    return {f"{k}{suffix}": v for k, v in scores.items()}


def span_answers(split: Split, enc: Encoded, logits: torch.Tensor) -> tuple[list, list]:
    """(examples, :class:`~tinyplm.tasks.squad_features.Prediction` per example) from window logits."""
    from tinyplm.tasks.squad_features import predict_answers

    feats = enc.meta
    examples = split.examples[: max(feats.example) + 1] if len(feats) else []
    lengths = enc.lengths()
    starts = [logits[i, : lengths[i], 0].numpy() for i in range(len(enc))]
    ends = [logits[i, : lengths[i], 1].numpy() for i in range(len(enc))]
    return examples, predict_answers(examples, feats, starts, ends)


def span_scores(split: Split, enc: Encoded, logits: torch.Tensor) -> dict[str, float]:
    """SQuAD EM/F1 (percent) of the answers read from ``logits``. v2.0 scores the answers at null
    threshold 0 and adds ``best_f1``/``best_exact`` at the threshold that maximises F1 on this
    split, with the threshold (``best_f1_thresh``), as the official v2.0 script does."""
    from tinyplm.evaluate.squad import answers_with_threshold, best_null_threshold, questions, squad_scores

    examples, preds = span_answers(split, enc, logits)
    qs = questions(examples)
    if not split.options.get("v2"):
        out = squad_scores(qs, {ex.id: p.text for ex, p in zip(examples, preds, strict=True)})
        return {"f1": out["f1"], "exact_match": out["exact_match"]}
    scores = squad_scores(qs, dict(zip((q.id for q in qs), answers_with_threshold(preds, 0.0), strict=True)), v2=True)
    threshold = best_null_threshold(examples, preds)
    best = squad_scores(qs, dict(zip((q.id for q in qs), answers_with_threshold(preds, threshold), strict=True)),
                        v2=True)
    out = {k: v for k, v in scores.items() if k not in ("total", "missing") and not k.endswith("_total")}
    return {**out, "best_f1": best["f1"], "best_exact": best["exact"], "best_f1_thresh": threshold}


def span_prediction_texts(split: Split, enc: Encoded, logits: torch.Tensor) -> dict[str, str]:
    """Question id -> answer text, the input of ``tinyplm evaluate-squad``; for v2.0 the empty
    string where the null answer wins at threshold 0 (the answers behind ``exact``/``f1``)."""
    from tinyplm.evaluate.squad import answers_with_threshold

    examples, preds = span_answers(split, enc, logits)
    texts = answers_with_threshold(preds, 0.0) if split.options.get("v2") else [p.text for p in preds]
    return {ex.id: t for ex, t in zip(examples, texts, strict=True)}


def token_scores(split: Split, enc: Encoded, logits: torch.Tensor, tags: tuple[str, ...]) -> dict[str, float]:
    """Entity-level precision, recall and F1 of the tags read at each word's first piece."""
    from tinyplm.tasks.tagging import tags_from_logits

    sentences = split.examples[: len(enc)]
    predicted = tags_from_logits(enc.meta, logits, tags, [len(s.tokens) for s in sentences])
    return entity_scores([list(s.tags) for s in sentences], predicted)


#: The metrics of one eval split from a head's logits: (data, split name, encoding, logits) -> metrics.
SPLIT_METRICS: PerHead = PerHead("task metrics from logits", {Head.SEQUENCE: _sequence_metrics,
                                                              Head.SPAN: _span_metrics, Head.TOKEN: _token_metrics,
                                                              Head.EMBEDDING: _embedding_metrics})


def window_refusal(model_dir, task) -> str | None:
    """Why the tokenizer of the reader in ``model_dir`` cannot cut ``task``'s (a SQuAD
    ``TaskSpec``) windows: its pairs take more special tokens than the recipe check counts (RoBERTa's
    and MPNet's 4), so ``doc_stride`` leaves no new context (:func:`window_problem`); None when it can
    or the folder is not a transformers checkpoint. Read from the tokenizer alone, before the model."""
    from pathlib import Path

    from tinyplm.models.loading import FORMAT_KEY, check_model_dir, load_tokenizer
    from tinyplm.tasks.squad_features import window_problem

    config = check_model_dir(Path(model_dir))
    if config.get(FORMAT_KEY) or not isinstance(config.get("vocab_size"), int):
        return None  # a graph's tokenizer is checked as it loads
    tokenizer = load_tokenizer(Path(model_dir), config["vocab_size"])
    return window_problem(tokenizer, task.max_length, task.window_stride(), task.max_query_length)
