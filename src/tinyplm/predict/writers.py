"""Prediction records written as JSON lines, CSV or TSV, one per input, in input order.

A record holds the input's ``line`` (its first line in the input file; left out for SQuAD JSON,
whose questions carry their ``id``), the input's ``key`` fields when it has them (a review
sentence's ``review_id`` and ``sentence`` number) and the prediction of the model's head:

- sequence: ``label`` (its name, e.g. ``positive``), ``label_id`` (its class index) and ``scores``
  (the probability of each label by name; CSV/TSV: ``score_<label>`` columns), or ``value`` for a
  regression model;
- span: ``id`` (when the input has one), ``answer``, its character offsets ``start``/``end`` in
  the context (``-1`` when there is no answer), ``score`` and ``null_score``;
- token: ``tokens`` and ``tags`` (lists; CSV/TSV: space-separated).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import TextIO

from tinyplm.errors import TinyplmError
from tinyplm.inference.model_info import ModelInfo
from tinyplm.inference.records import Prediction
from tinyplm.predict.sources import Row
from tinyplm.tasks.heads import Head, PerHead

OUTPUT_FORMATS = ("jsonl", "csv", "tsv")


def output_format(output: str | None, asked: str | None) -> str:
    """``asked``, else from ``output``'s suffix (``.csv``, ``.tsv``), else ``jsonl``. Raises
    ``TinyplmError`` for an unknown format."""
    if asked is not None:
        if asked not in OUTPUT_FORMATS:
            raise TinyplmError(f"--format: expected one of {', '.join(OUTPUT_FORMATS)}, got {asked!r}")
        return asked
    suffix = Path(output).suffix.lower().lstrip(".") if output else ""
    return suffix if suffix in OUTPUT_FORMATS else "jsonl"


def record(row: Row, pred: Prediction) -> dict:
    """The JSON record of one prediction (see the module docstring)."""
    out = {"line": row.line} if row.line else {}
    return {**out, **(row.key or {}), **pred.as_dict()}


def columns(info: ModelInfo, with_line: bool = True, keys: tuple[str, ...] = ()) -> list[str]:
    """The CSV/TSV columns for ``info``'s head (``keys``: the inputs' key fields, after ``line``)."""
    first = (["line"] if with_line else []) + list(keys)
    return [*first, *COLUMNS[info.head](info)]


def _label_columns(info: ModelInfo) -> list[str]:
    if info.is_regression:
        return ["value"]
    return ["label", "label_id", *(f"score_{label}" for label in info.labels)]


#: The prediction's own CSV/TSV columns for each head (a vector has none: write it as JSON lines).
COLUMNS: PerHead = PerHead("CSV/TSV columns", {
    Head.SEQUENCE: _label_columns,
    Head.SPAN: lambda info: ["id", "answer", "start", "end", "score", "null_score"],
    Head.TOKEN: lambda info: ["tokens", "tags"],
})


def flat(row: Row, pred: Prediction) -> dict:
    """One record as CSV/TSV cells: scores spread over columns, word lists space-joined."""
    out = record(row, pred)
    for key in ("tokens", "tags"):
        if key in out:
            out[key] = " ".join(out[key])
    for label, score in out.pop("scores", {}).items():
        out[f"score_{label}"] = score
    return out


class Writer:
    """Writes records to a text stream in one of :data:`OUTPUT_FORMATS` (CSV/TSV: a header line
    first). ``with_line`` False leaves the ``line`` column out (SQuAD JSON input); ``keys`` are
    the inputs' key columns (reviews: ``review_id``, ``sentence``)."""

    def __init__(self, fh: TextIO, fmt: str, info: ModelInfo, with_line: bool = True,
                 keys: tuple[str, ...] = ()) -> None:
        self.fh, self.fmt = fh, fmt
        self._table = None
        if fmt != "jsonl":
            delimiter = "\t" if fmt == "tsv" else ","
            self._table = csv.DictWriter(fh, fieldnames=columns(info, with_line, keys), delimiter=delimiter,
                                         extrasaction="ignore", lineterminator="\n")
            self._table.writeheader()

    def write(self, row: Row, pred: Prediction) -> None:
        if self._table is None:
            self.fh.write(json.dumps(record(row, pred), ensure_ascii=False) + "\n")
        else:
            self._table.writerow(flat(row, pred))
