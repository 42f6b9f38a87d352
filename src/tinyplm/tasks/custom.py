"""Custom tasks from your own CSV or JSONL files.

A ``.csv`` file has a header line and normal quoting; a ``.jsonl`` (or ``.ndjson``) file holds one
JSON object per line. Both are read by the one reader of their format (:mod:`tinyplm.tasks.readers`),
as ``tinyplm predict`` reads them. Columns/keys are named by the caller::

    task = custom_task("reviews", Path("train.csv"), Path("dev.csv"),
                       text_column="review", label_column="stars")
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from tinyplm.errors import DataError, TinyplmError, did_you_mean
from tinyplm.tasks.base import (
    CLASSIFICATION_METRICS,
    REGRESSION_METRICS,
    Example,
    Task,
)
from tinyplm.tasks.io import at, no_examples
from tinyplm.tasks.readers.fields import Fields, Labels, missing, sequence_rows
from tinyplm.tasks.readers.formats import format_of
from tinyplm.tasks.readers.jsonl import read_json_lines
from tinyplm.tasks.readers.rows import Row, RowError, file_lines, items
from tinyplm.tasks.readers.table import read_table, require_columns


def custom_task(
    name: str,
    train: Path,
    dev: Path,
    text_column: str,
    label_column: str,
    text_pair_column: str | None = None,
    labels: list[str] | None = None,
    regression: bool = False,
    metrics: list[str] | None = None,
) -> Task:
    """A :class:`Task` over your own train and dev files (``.csv`` or ``.jsonl``).

    ``labels`` fixes the class order; when omitted it is inferred from the TRAIN file as the
    sorted unique label strings (numerically sorted when every label is an integer, so "10"
    follows "9"). Default metrics: accuracy and f1_macro, or pearson and spearman for
    ``regression``. Raises ``TinyplmError`` for an unknown file type or metric, and
    ``DataError`` when labels must be inferred and the train file is missing or malformed.
    """
    if label_column in (text_column, text_pair_column):
        raise TinyplmError(f"custom task '{name}': the label column {label_column!r} is also a text column, so the "
                           "model would read its answer; name another column for the text (task.text_column, "
                           "task.text_pair_column) or the label (task.label_column)")
    train, dev = Path(train).expanduser().resolve(), Path(dev).expanduser().resolve()
    for path in (train, dev):
        _format(path)
    chosen = _check_metrics(metrics, regression)
    columns = Fields(text=text_column, pair=text_pair_column, label=label_column)
    if regression:
        label_names: tuple[str, ...] = ()
    elif labels is not None:
        if len(labels) < 2:
            raise TinyplmError(f"custom task '{name}': give at least two labels, got {labels}")
        label_names = tuple(str(label) for label in labels)
        if twice := sorted({label for label in label_names if label_names.count(label) > 1}):
            raise TinyplmError(f"custom task '{name}': task.labels names {', '.join(map(repr, twice))} more than once, "
                               "which would add an output no example can have; name each label once")
    else:
        if not train.is_file():
            what = "custom" if name == "custom" else f"custom {name}"
            raise DataError(f"{train}: file not found (expected the {what} train split)")
        label_names = infer_labels(train, columns)
    return Task(
        name=name,
        labels=label_names,
        is_regression=regression,
        metrics=chosen,
        files={"train": train, "dev": dev},
        reader=partial(
            read_custom_file, columns=columns, labels=label_names, regression=regression,
            labels_from=None if labels is not None or regression else train,
        ),
        description=f"custom task from {train.name} and {dev.name}",
        collection="custom",
    )


@dataclass(frozen=True)
class _Found(Labels):
    """A label rule that takes every label as it is and collects it (to infer the label set)."""

    found: set[str] = field(default_factory=set)

    def parse(self, raw: str, path: Path | str | None = None) -> int:
        if not raw.strip():
            raise RowError("the label is empty")
        self.found.add(raw.strip())
        return 0


def infer_labels(path: Path, columns: Fields) -> tuple[str, ...]:
    """The sorted unique label strings of ``path`` (raises ``DataError`` if fewer than two, or for a
    bad row)."""
    rule = _Found()
    if not items(sequence_rows(_records(path, columns), columns, rule, path)):
        raise no_examples(path)
    found = rule.found
    if len(found) < 2:
        raise DataError(f"{path}: a classifier needs two or more labels, found only {found}")
    _one_spelling(path, found)
    if all(_is_int(label) for label in found):
        return tuple(sorted(found, key=int))
    return tuple(sorted(found))


def _one_spelling(path: Path, found: set[str]) -> None:
    """Raise ``DataError`` when two labels of ``path`` are one whole number written two ways (``1``
    and ``1.0``, ``2`` and ``02``: each would become a class of its own), or a label is ``nan`` (a
    missing value written out). Labels with fractions are names as written (``1.1`` and ``1.10``
    may be two sections)."""
    by_value: dict[int, str] = {}
    for label in sorted(found):
        if label.lower() == "nan":
            raise DataError(f"{path}: a label is {label!r}, a missing value written out; give every row its label")
        value = _whole(label)
        if value is None:
            continue
        if value in by_value:
            raise DataError(f"{path}: the labels {by_value[value]!r} and {label!r} are one number written two ways, "
                            "and each would become a class of its own; write each label one way (or give "
                            "task.labels)")
        by_value[value] = label


def _whole(label: str) -> int | None:
    """The whole number ``label`` writes (``1``, ``01``, ``1.0``), exactly; None for anything else."""
    try:
        return int(label)
    except ValueError:
        pass
    try:
        value = float(label)
    except ValueError:
        return None
    return int(value) if value.is_integer() and "." in label and label.rstrip("0").endswith(".") else None


def read_custom_file(path: Path, split: str, columns: Fields, labels: tuple[str, ...], regression: bool,
                     labels_from: Path | None = None) -> list[Example]:
    """Read one custom file into examples; labels become indices into ``labels`` (or floats).

    ``labels_from`` is the file ``labels`` were inferred from (named when a label is unknown).
    Raises ``DataError`` naming the file and line of a bad row."""
    rule = Labels(labels, regression, source=labels_from)
    examples = items(sequence_rows(_records(path, columns), columns, rule, path))
    if not examples:
        raise no_examples(path)
    return examples


def _records(path: Path, columns: Fields) -> Iterator[Row]:
    """The records of a CSV (a header line naming the columns) or JSON-lines file, as rows of dicts
    (a JSON line that is no object is passed on, for :func:`sequence_rows` to refuse)."""
    kind = _format(path)
    if kind == "jsonl":
        rows = read_json_lines(file_lines(path), str(path))
        return (_with_keys(row, columns) for row in rows)
    table = read_table(file_lines(path), str(path), tsv=False)
    require_columns(table.names, columns.required(labels=True), at(path, table.header_line or 1))
    return table.rows


def _with_keys(row: Row, columns: Fields) -> Row:
    """A JSON-lines row, refused (naming what it has) when its object lacks a key ``columns`` needs."""
    if row.error is None and isinstance(row.item, dict):
        lacking = [key for key in columns.required(labels=True) if key not in row.item]
        if lacking:
            return Row(row.line, row.where, error=f"{row.where}: {missing(lacking[0], row.item)}")
    return row


def _format(path: Path) -> str:
    """"csv" or "jsonl" from the file suffix (:data:`~tinyplm.tasks.readers.formats.SUFFIXES`); raises
    ``TinyplmError`` for anything else."""
    kind = format_of(path)
    if kind not in ("csv", "jsonl"):
        raise TinyplmError(f"{path}: unknown file type '{path.suffix}'; expected .csv or .jsonl")
    return kind


def _check_metrics(metrics: list[str] | None, regression: bool) -> tuple[str, ...]:
    """The metric names to use; raises ``TinyplmError`` for one that does not fit the task."""
    allowed = REGRESSION_METRICS if regression else CLASSIFICATION_METRICS
    if metrics is None:
        return ("pearson", "spearman") if regression else ("accuracy", "f1_macro")
    if not metrics:
        raise TinyplmError("metrics must name at least one metric")
    for metric in metrics:
        if metric not in allowed:
            kind = "regression" if regression else "classification"
            hint = did_you_mean(metric, allowed) or "."
            known = ", ".join(allowed)
            raise TinyplmError(f"unknown {kind} metric '{metric}'{hint} Known: {known}")
    return tuple(metrics)


def _is_int(text: str) -> bool:
    """True when ``text`` parses as an integer ("-1", "3")."""
    try:
        int(text)
    except ValueError:
        return False
    return True
