"""One record's named fields (a table row, a JSON object) -> one example, checked the same way for
training and prediction.

:class:`Fields` names the fields that hold the text, the optional second text and the label;
:func:`text_value` is the one check of a text, :class:`Labels` the one parse of a label.
Every check raises :class:`~tinyplm.tasks.readers.rows.RowError` naming the field; the reader adds
the file and line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from tinyplm.tasks.base import Example
from tinyplm.tasks.io import encodable, has_visible, quoted
from tinyplm.tasks.json_layout import shown
from tinyplm.tasks.readers.rows import Row, RowError


@dataclass(frozen=True)
class Fields:
    """Which fields (columns, JSON keys) hold the ``text``, the second text (``pair``), the
    ``label`` and a question's ``id``. ``pair_required`` False: a record without ``pair`` is a
    single text (prediction)."""

    text: str
    pair: str | None = None
    label: str | None = None
    pair_required: bool = True
    id: str | None = None

    def required(self, labels: bool) -> list[str]:
        """The names every record must have (the label's only when ``labels`` are required)."""
        pair = [self.pair] if self.pair and self.pair_required else []
        return [self.text, *pair, *([self.label] if labels and self.label else [])]


@dataclass(frozen=True)
class Labels:
    """How a label field is read: one of ``names`` (a class index), or a score within ``bounds``
    (``regression``). ``source`` is the file the names were inferred from (named when one is unknown)."""

    names: tuple[str, ...] = ()
    regression: bool = False
    bounds: tuple[float, float] | None = None
    source: Path | None = None

    def parse(self, raw: str, path: Path | str | None = None) -> int | float:
        """The class index (or score) of ``raw``; raises :class:`RowError`."""
        value = raw.strip()
        if self.regression:
            return _score(value, self.bounds)
        if not value:
            raise RowError("the label is empty")
        try:
            return self.names.index(value)
        except ValueError:
            shown_names = ", ".join(quoted(label, "") for label in self.names[:20])
            if len(self.names) > 20:
                shown_names += f" ... ({len(self.names)} labels)"
            origin = f" (the labels found in {self.source})" if self.source is not None and self.source != path else ""
            raise RowError(f"label {quoted(value)} is not one of {shown_names}{origin}") from None


def _score(value: str, bounds: tuple[float, float] | None) -> float:
    """A finite number within ``bounds``; raises :class:`RowError`."""
    try:
        score = float(value)
    except ValueError:
        score = math.nan
    if not math.isfinite(score):
        raise RowError(f"score {quoted(value)} is not a number")
    if bounds is not None and not bounds[0] <= score <= bounds[1]:
        raise RowError(f"score {quoted(value, '')} is outside [{bounds[0]:g}, {bounds[1]:g}]")
    return score


def check_text(value: str, name: str) -> str:
    """``value`` unchanged unless it is empty, only whitespace or invisible characters (zero-width
    spaces and joiners: :func:`~tinyplm.tasks.io.has_visible`), or holds an unpaired surrogate (a
    JSON escape such as ``\\ud800``, or an undecodable byte, which no tokenizer accepts);
    ``name`` says where it is (``column 'text'``). Raises :class:`RowError`."""
    if not value.strip():
        raise RowError(f"empty text in {name}")
    if not has_visible(value):
        raise RowError(f"{name} holds only invisible characters ({ascii(value[:40])}: zero-width or format "
                       "characters), an empty text to a reader; give the text or drop the row")
    if not encodable(value):
        raise RowError(f"{name} holds an unpaired surrogate escape (\\ud800-\\udfff) or bytes that are not "
                       "UTF-8, which are no characters; fix the text")
    return value


def text_value(values: Mapping[str, object], key: str) -> str:
    """``values[key]`` as a checked text (:func:`check_text`); raises :class:`RowError`."""
    if key not in values:
        raise missing(key, values)
    value = values[key]
    if not isinstance(value, str):
        raise RowError(f"column '{key}' holds {shown(value)}, expected a string")
    return check_text(value, f"column '{key}'")


def label_value(values: Mapping[str, object], key: str) -> str:
    """``values[key]`` as the string a table would hold (JSON ``true`` -> ``"true"``, ``1`` -> ``"1"``)."""
    if key not in values:
        raise missing(key, values)
    value = values[key]
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise RowError(f"key '{key}' holds {value}, expected a label (a string or a finite number)")
        return str(value)
    raise RowError(f"key '{key}' holds {shown(value)}, expected a string or number")


def missing(key: str, values: Mapping[str, object]) -> RowError:
    """The error for a record without ``key``, listing what it has."""
    found = ", ".join(repr(k) for k in list(values)[:12]) or "none"
    return RowError(f"missing key '{key}'; found keys: {found}")


def sequence_example(values: Mapping[str, object], fields: Fields, line: int, labels: Labels | None,
                     path: Path | str | None = None) -> Example:
    """The :class:`Example` ``values`` describe: its text, its pair (when ``fields`` has one and the
    record holds it), and its label parsed by ``labels`` (None: no label is read, the example's is
    None). Raises :class:`RowError`."""
    text = text_value(values, fields.text)
    pair = None
    if fields.pair and (fields.pair_required or values.get(fields.pair) is not None):
        pair = text_value(values, fields.pair)
    label = None
    if labels is not None and fields.label is not None:
        label = labels.parse(label_value(values, fields.label), path)
    return Example(text, pair, label, line)


def sequence_rows(rows: Iterable[Row], fields: Fields, labels: Labels | None, name: Path | str) -> Iterator[Row]:
    """``rows`` whose items are records (a table row's dict, a parsed JSON line) as rows of
    :func:`sequence_example` (see :func:`record_rows`)."""
    return record_rows(rows, lambda values, line: sequence_example(values, fields, line, labels, name))


def record_rows(rows: Iterable[Row], build: Callable[[Mapping[str, object], int], object]) -> Iterator[Row]:
    """``rows`` whose items are records, each made an item by ``build(record, line)``; a record that
    is no JSON object, or that ``build`` refuses (:class:`RowError`), becomes an error row naming its
    place. Error rows pass as they are."""
    for row in rows:
        if row.error is not None:
            yield row
            continue
        try:
            if not isinstance(row.item, Mapping):
                raise RowError(f"expected a JSON object, got {type(row.item).__name__}")
            yield replace(row, item=build(row.item, row.line))
        except RowError as exc:
            yield replace(row, item=None, error=f"{row.where}: {exc}")
