"""Typed task data: what every task reader returns.

A :class:`Task` knows its files, its label set and which metrics are official for it; reading a
split returns a :class:`Split` of :class:`Example`. Metric *computation* lives in
``tinyplm.evaluate.metrics`` (tasks only name them), so the import direction stays one-way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tinyplm.errors import DataError, TinyplmError, did_you_mean
from tinyplm.tasks.heads import Head

#: Metric names understood by ``tinyplm.evaluate.metrics.compute`` (kept here so tasks can
#: validate a recipe's metric list without importing the later ``evaluate`` layer).
#: Metrics of the positive class's score (binary tasks), not of the argmax prediction: ROC AUC, PR AUC
#: (average precision) and the F1 of class 1 at the score threshold that maximises it on the split.
SCORE_METRICS: tuple[str, ...] = ("roc_auc", "pr_auc", "f1_best")
CLASSIFICATION_METRICS: tuple[str, ...] = ("accuracy", "f1", "f1_macro", "mcc", *SCORE_METRICS)
REGRESSION_METRICS: tuple[str, ...] = ("pearson", "spearman")
METRIC_NAMES: tuple[str, ...] = CLASSIFICATION_METRICS + REGRESSION_METRICS
#: How the classes are weighed in the cross-entropy: ``balanced`` = n / (classes x n_c) from the
#: training labels (scikit-learn's rule), ``none`` = all 1.
CLASS_WEIGHTS: tuple[str, ...] = ("balanced", "none")


@dataclass(frozen=True)
class Example:
    """One example.

    ``label`` is a class index (``int``) for classification or a float score for regression (None
    where the reader was asked for no label: an input read for prediction).
    ``line`` is the 1-based line number in ``source`` file, for error messages.
    ``group``: what the example belongs to where the task names it (a Goodreads sentence's book),
    so that held-out examples are drawn in whole groups (:func:`tinyplm.tasks.holdout.hold_out`).
    """

    text: str
    text_pair: str | None
    label: int | float | None
    line: int = 0
    group: str | None = None


#: The label of a training example without one (a corpus text beside the task's examples, ``data:
#: task+corpus``): PyTorch's ignored class id for classification, NaN for a score. The hard loss
#: skips such rows (``tinyplm.train.kd.hard_label_loss``); the teacher's logits are their targets.
UNLABELLED_CLASS = -100


def unlabelled(is_regression: bool) -> int | float:
    """The label of an unlabelled training example of a classification or regression task."""
    return float("nan") if is_regression else UNLABELLED_CLASS


@dataclass(frozen=True)
class Split:
    """The examples of one split read from one file.

    ``examples`` are :class:`Example` for ``sequence`` and ``embedding`` tasks (an embedding example is
    its ``text``), ``tinyplm.tasks.squad.QAExample`` for ``span`` and ``tinyplm.tasks.conll.Sentence``
    for ``token`` tasks; ``options`` are the
    head's encoding options (SQuAD: ``doc_stride``, ``max_query_length``).
    """

    name: str
    examples: list
    source: Path
    head: Head = Head.SEQUENCE
    options: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.examples)


@dataclass(frozen=True)
class TaskData:
    """Everything a training stage needs from a task.

    ``evals`` maps eval split name -> split (GLUE tasks: ``{"dev": ...}``; MNLI:
    ``{"dev_matched": ..., "dev_mismatched": ...}``).
    ``metric_suffix`` maps an eval split to the suffix of its metric keys (MNLI mismatched: "_mm").
    ``class_weights`` (one per label) weigh the cross-entropy when the task asks for it (None: not);
    ``info`` says how the data was split and weighed, for the report. ``guard_metrics``: held-out
    metric keys besides the one choices are made on that the final model must keep
    ``final.min_retention`` of too (the embedding task's ``ndcg_at_10_holdout_passages``).
    ``similarity``: how the embedding task compares vectors (sentence-transformers'
    ``similarity_fn_name`` of the models judged, set by whoever reads the task beside its model;
    None: cosine).
    """

    task: str
    train: Split
    evals: dict[str, Split]
    labels: tuple[str, ...]
    is_regression: bool
    metrics: tuple[str, ...]
    primary_metric: str
    metric_suffix: dict[str, str] = field(default_factory=dict)
    head: Head = Head.SEQUENCE
    class_weights: tuple[float, ...] | None = None
    info: dict = field(default_factory=dict)
    guard_metrics: tuple[str, ...] = ()
    similarity: str | None = None

    @property
    def num_labels(self) -> int:
        """The model's outputs (the head table's :meth:`~tinyplm.tasks.heads.HeadRow.output_labels`): 1 for
        regression, 2 for a span head (start, end), none for an embedding head, else the number of classes."""
        return len(Head(self.head).row.output_labels(self.labels, self.is_regression))


@dataclass(frozen=True)
class Task:
    """A dataset: its files, label set and official metrics.

    ``files`` maps split name -> path (absolute, already resolved against the data dir).
    ``reader(path, split_name)`` returns the examples of that file or raises ``DataError``.
    ``metrics`` are names understood by ``tinyplm.evaluate.metrics.compute``; the first is primary.
    ``eval_splits`` are the split names evaluated (MNLI: matched and mismatched).
    ``metric_suffix`` maps an eval split to a suffix for its metric keys (MNLI mismatched: "_mm").
    ``collection`` names the collection it belongs to, in messages ("GLUE", "custom").
    ``head`` is a :class:`~tinyplm.tasks.heads.Head`; ``options`` go to every split (see :class:`Split`).
    ``class_weights`` is a rule of :data:`CLASS_WEIGHTS`; ``info`` describes the data for reports.
    """

    name: str
    labels: tuple[str, ...]
    is_regression: bool
    metrics: tuple[str, ...]
    files: dict[str, Path]
    reader: Callable[[Path, str], list[Example]]
    eval_splits: tuple[str, ...] = ("dev",)
    metric_suffix: dict[str, str] = field(default_factory=dict)
    description: str = ""
    collection: str = ""
    head: Head = Head.SEQUENCE
    options: dict = field(default_factory=dict)
    class_weights: str = "none"
    info: dict = field(default_factory=dict)

    @property
    def primary_metric(self) -> str:
        """The metric that selects checkpoints and leads reports (the first of ``metrics``)."""
        return self.metrics[0]

    def read(self, split: str) -> Split:
        """Read one split.

        Raises ``TinyplmError`` for a split name the task does not have, and ``DataError`` naming
        the file (and line) when the file is missing or malformed.
        """
        if split not in self.files:
            known = ", ".join(self.files)
            hint = did_you_mean(split, self.files) or "."
            raise TinyplmError(f"task '{self.name}' has no split '{split}'{hint} Splits: {known}")
        path = self.files[split]
        if not path.is_file():
            what = " ".join(dict.fromkeys(f"{self.collection} {self.name}".split()))  # not "custom custom"
            raise DataError(f"{path}: file not found (expected the {what} {split} split)")
        return Split(name=split, examples=self.reader(path, split), source=path, head=self.head,
                     options=dict(self.options))

    def load(self, train: bool = True) -> TaskData:
        """Read train and every eval split into a :class:`TaskData` (raises ``DataError``); with
        ``train`` False the train split is left unread (empty): what ``evaluate`` and ``bench`` need,
        where a task's train file may be absent (GLUE's QNLI is often had as its dev file alone)."""
        train = self.read("train") if train else Split("train", [], self.files.get("train", Path("")), self.head,
                                                         dict(self.options))
        evals = {name: self.read(name) for name in self.eval_splits}
        self._check_both_classes(evals)
        weights = None
        if self.class_weights == "balanced" and not self.is_regression and Head(self.head).row.class_weights:
            weights = balanced_weights([ex.label for ex in train.examples], len(self.labels))
        info = {**self.info, **({"class_weights": dict(zip(self.labels, weights, strict=True))} if weights else {})}
        return TaskData(
            task=self.name, train=train, evals=evals, labels=self.labels, is_regression=self.is_regression,
            metrics=self.metrics, primary_metric=self.primary_metric, metric_suffix=dict(self.metric_suffix),
            head=self.head, class_weights=weights, info=info,
        )

    def _check_both_classes(self, evals: dict[str, Split]) -> None:
        """Raise ``DataError`` when a score metric (ROC AUC, PR AUC, best F1) is asked of an eval
        split that holds one class only: the metric is undefined there, and a run would find out
        only when it measures, after training."""
        asked = [m for m in self.metrics if m in SCORE_METRICS]
        if not asked or self.is_regression or not Head(self.head).row.roc:
            return
        for name, split in evals.items():
            found = sorted({ex.label for ex in split.examples})
            if len(found) < 2:
                only = ", ".join(self.labels[i] for i in found) or "none"
                how = f" ({self.info['dev_split']})" if "dev_split" in self.info else ""
                count = f"{len(split.examples)} example{'s' if len(split.examples) != 1 else ''}"
                raise DataError(f"{split.source}: the {name} split{how} has {count}, all of class {only}; "
                                f"{asked[0]} needs examples of both classes (a larger file, or one whose dev side "
                                "holds both)")

    def data_present(self) -> dict[str, bool]:
        """Which split files exist (for ``tinyplm tasks``): split name -> file exists."""
        return {split: path.is_file() for split, path in self.files.items()}


def balanced_weights(labels: list[int], classes: int) -> tuple[float, ...]:
    """scikit-learn's ``balanced`` class weights: ``n / (classes * n_c)`` (a class absent from
    ``labels`` gets the weight of a class seen once), rounded to 6 digits."""
    counts = [0] * classes
    for label in labels:
        counts[int(label)] += 1
    return tuple(round(len(labels) / (classes * max(c, 1)), 6) for c in counts)
