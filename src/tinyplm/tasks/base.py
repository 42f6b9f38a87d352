"""Typed task data: what every task reader returns.

A :class:`Task` knows its files, its label set and which metrics are official for it; reading a
split returns a :class:`Split` of :class:`Example`. Metric *computation* lives in
``tinyplm.evaluate.metrics`` (tasks only name them), so the import direction stays one-way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class Example:
    """One labelled example.

    ``label`` is a class index (``int``) for classification or a float score for regression.
    ``line`` is the 1-based line number in ``source`` file, for error messages.
    """

    text: str
    text_pair: str | None
    label: int | float
    line: int = 0


@dataclass(frozen=True)
class Split:
    """The examples of one split read from one file."""

    name: str
    examples: list[Example]
    source: Path

    def __len__(self) -> int:
        return len(self.examples)


@dataclass(frozen=True)
class TaskData:
    """Everything a training stage needs from a task.

    ``evals`` maps eval split name -> split (GLUE tasks: ``{"dev": ...}``; MNLI:
    ``{"dev_matched": ..., "dev_mismatched": ...}``).
    """

    task: str
    train: Split
    evals: dict[str, Split]
    labels: tuple[str, ...]
    is_regression: bool
    metrics: tuple[str, ...]
    primary_metric: str

    @property
    def num_labels(self) -> int:
        """1 for regression, else the number of classes."""
        return 1 if self.is_regression else len(self.labels)


@dataclass(frozen=True)
class Task:
    """A dataset: its files, label set and official metrics.

    ``files`` maps split name -> path (absolute, already resolved against the data dir).
    ``reader(path, split_name)`` returns the examples of that file or raises ``DataError``.
    ``metrics`` are names understood by ``tinyplm.evaluate.metrics.compute``; the first is primary.
    ``eval_splits`` are the split names evaluated (MNLI: matched and mismatched).
    ``metric_suffix`` maps an eval split to a suffix for its metric keys (MNLI mismatched: "_mm").
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

    @property
    def primary_metric(self) -> str:
        return self.metrics[0]

    def read(self, split: str) -> Split:
        """Read one split; raises ``DataError`` naming the file (and line) on bad input."""
        ...

    def load(self) -> TaskData:
        """Read train and every eval split into a :class:`TaskData`."""
        ...

    def data_present(self) -> dict[str, bool]:
        """Which split files exist (for ``tinyplm tasks``)."""
        ...
