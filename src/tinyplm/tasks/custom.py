"""Custom tasks from your own CSV or JSONL files.

A ``.csv`` file is read with ``csv.DictReader`` (normal quoting, a header line); a ``.jsonl``
(or ``.ndjson``) file holds one JSON object per line. Columns/keys are named by the caller::

    task = custom_task("reviews", Path("train.csv"), Path("dev.csv"),
                       text_column="review", label_column="stars")
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from tinyplm.errors import DataError, TinyplmError, did_you_mean
from tinyplm.tasks.base import (
    CLASSIFICATION_METRICS,
    REGRESSION_METRICS,
    Example,
    Task,
)
from tinyplm.tasks.io import (
    at,
    check_columns,
    no_examples,
    parse_label,
    parse_score,
    read_text,
    require_text,
)

FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


@dataclass(frozen=True)
class Columns:
    """Which columns (CSV) or keys (JSONL) hold the text, the optional pair and the label."""

    text: str
    label: str
    pair: str | None = None

    @property
    def required(self) -> list[str]:
        """The names every row must have."""
        return [self.text, self.label] + ([self.pair] if self.pair else [])


@dataclass(frozen=True)
class Record:
    """One row before its label is mapped: the label is still the raw string."""

    line: int
    text: str
    pair: str | None
    label: str


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
    train, dev = Path(train).expanduser().resolve(), Path(dev).expanduser().resolve()
    for path in (train, dev):
        _format(path)
    chosen = _check_metrics(metrics, regression)
    columns = Columns(text=text_column, label=label_column, pair=text_pair_column)
    if regression:
        label_names: tuple[str, ...] = ()
    elif labels is not None:
        if len(labels) < 2:
            raise TinyplmError(f"custom task '{name}': give at least two labels, got {labels}")
        label_names = tuple(str(label) for label in labels)
    else:
        if not train.is_file():
            raise DataError(f"{train}: file not found (expected the custom {name} train split)")
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


def infer_labels(path: Path, columns: Columns) -> tuple[str, ...]:
    """The sorted unique label strings of ``path`` (raises ``DataError`` if fewer than two)."""
    found = {record.label.strip() for record in read_records(path, columns)}
    if len(found) < 2:
        raise DataError(f"{path}: a classifier needs two or more labels, found only {found}")
    if all(_is_int(label) for label in found):
        return tuple(sorted(found, key=int))
    return tuple(sorted(found))


def read_custom_file(
    path: Path, split: str, columns: Columns, labels: tuple[str, ...], regression: bool,
    labels_from: Path | None = None,
) -> list[Example]:
    """Read one custom file into examples; labels become indices into ``labels`` (or floats).

    ``labels_from`` is the file ``labels`` were inferred from (named when a label is unknown).
    Raises ``DataError`` naming the file and line of a bad row."""
    examples = []
    for record in read_records(path, columns):
        label: int | float
        if regression:
            label = parse_score(record.label, path, record.line)
        else:
            label = parse_label(record.label, labels, path, record.line, labels_from)
        examples.append(Example(record.text, record.pair, label, record.line))
    return examples


def read_records(path: Path, columns: Columns) -> list[Record]:
    """Read a CSV or JSONL file into records; raises ``DataError`` (file:line) on bad input."""
    reader = _read_csv if _format(path) == "csv" else _read_jsonl
    records = reader(path, columns)
    if not records:
        raise no_examples(path)
    return records


def _read_csv(path: Path, columns: Columns) -> list[Record]:
    """Records of a CSV file with a header line (``csv.DictReader``, normal quoting)."""
    # lines end at "\n" only (as in the TSV reader), so a stray "\r" does not shift line numbers
    lines = [line + "\n" for line in read_text(path).split("\n")]
    reader = csv.DictReader(lines)
    try:
        found = list(reader.fieldnames or [])
        if not found:
            raise no_examples(path, "the file is empty")
        check_columns(path, found, columns.required)
        reader.fieldnames = [name.strip() for name in found]  # " label" in the header is "label"
        records = []
        for row in reader:
            line = reader.line_num  # the record's last line (its only line unless quoted)
            if None in row or None in row.values():
                got = len(found) + len(row.get(None) or []) - list(row.values()).count(None)
                raise DataError(f"{at(path, line)}: expected {len(found)} fields, got {got}")
            records.append(_record(row, columns, path, line))
    except csv.Error as err:
        raise DataError(f"{at(path, max(reader.reader.line_num, 1))}: cannot parse CSV ({err})") from None
    return records


def _read_jsonl(path: Path, columns: Columns) -> list[Record]:
    """Records of a JSON-lines file: one object per non-blank line."""
    records = []
    for line, text in enumerate(read_text(path).split("\n"), start=1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as err:
            raise DataError(f"{at(path, line)}: not valid JSON ({err.msg})") from None
        if not isinstance(obj, dict):
            raise DataError(f"{at(path, line)}: expected a JSON object, got {type(obj).__name__}")
        for key in columns.required:
            if key not in obj:
                shown = ", ".join(repr(k) for k in obj) or "none"
                raise DataError(f"{at(path, line)}: missing key '{key}'; found keys: {shown}")
        row = {key: _jsonl_value(obj[key], key, path, line) for key in columns.required}
        records.append(_record(row, columns, path, line))
    return records


def _record(row: dict[str, str], columns: Columns, path: Path, line: int) -> Record:
    """A :class:`Record` from one row, checking the texts are not empty."""
    text = require_text(row[columns.text], columns.text, path, line)
    pair = require_text(row[columns.pair], columns.pair, path, line) if columns.pair else None
    return Record(line=line, text=text, pair=pair, label=row[columns.label])


def _jsonl_value(value: object, key: str, path: Path, line: int) -> str:
    """A JSON value as the string the CSV reader would see (true -> "true", 1 -> "1")."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    kind = "null" if value is None else type(value).__name__
    raise DataError(f"{at(path, line)}: key '{key}' holds {kind}, expected a string or number")


def _format(path: Path) -> str:
    """"csv" or "jsonl" from the file suffix; raises ``TinyplmError`` for anything else."""
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
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
