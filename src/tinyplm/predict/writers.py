"""Prediction records written as JSON lines, CSV or TSV, one per input, in input order.

A record holds the input's ``line`` (its first line in the input file; left out for SQuAD JSON,
whose questions carry their ``id``), the input's ``key`` fields when it has them (a review
sentence's ``review_id`` and ``sentence`` number) and the prediction of the model's head:

- sequence: ``label`` (its name, e.g. ``positive``), ``label_id`` (its class index) and ``scores``
  (the probability of each label by name; CSV/TSV: ``score_<label>`` columns), or ``value`` for a
  regression model;
- span: ``id`` (when the input has one), ``answer``, its character offsets ``start``/``end`` in
  the context (``-1`` when there is no answer), ``score`` and ``null_score``;
- token: ``tokens`` and ``tags`` (lists; CSV/TSV: space-separated);
- embedding: ``vector`` (a list of floats). CSV/TSV holds no vectors (refused, naming the formats
  that do); ``npy`` (:class:`ArrayWriter`, the default for an ``--output`` ending in ``.npy``) writes
  the vectors as one float32 ``(n, dim)`` array, row i for the i-th input, and beside it
  ``X.ids.json`` (:func:`ids_path`): a JSON list whose item i is row i's ``line`` (and key fields),
  both files written atomically once every row is done.

An output that names a stream rather than a file (:func:`is_stream`: ``/dev/stdout``, ``/dev/null``,
a pipe such as a shell's ``>(gzip > x.gz)``) is written into as it is (:func:`output_file`), opened
for append: the atomic write's rename would put a regular file in its place (in ``/dev``, for every
process after), and ``/dev/stdout`` behind a shell's ``>> all.jsonl`` keeps what the file held (the
shell's ``>`` has emptied it already). A link to a file is followed: the file it points at is
replaced, and the link kept. A block device (a disk) is no place for predictions (:func:`is_disk`).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import numpy as np

from tinyplm.errors import TinyplmError
from tinyplm.files import atomic_open, atomic_path
from tinyplm.inference.model_info import ModelInfo
from tinyplm.inference.records import Prediction
from tinyplm.predict.sources import Row
from tinyplm.tasks.heads import Head, PerHead

OUTPUT_FORMATS = ("jsonl", "csv", "tsv", "npy")
#: Formats written as one array once every row is done (a file, never stdout).
ARRAY_FORMATS = ("npy",)
#: Output suffixes of formats predict does not write: JSON lines under such a name would be taken for
#: that format by whatever reads it next, so they are refused (any other unknown suffix gets JSON lines).
OTHER_FORMATS = {"parquet": "Apache Parquet", "pq": "Apache Parquet", "arrow": "Apache Arrow",
                 "feather": "Apache Arrow", "orc": "Apache ORC", "avro": "Apache Avro", "xlsx": "Excel",
                 "xls": "Excel", "ods": "OpenDocument", "pkl": "pickle", "pickle": "pickle", "h5": "HDF5",
                 "hdf5": "HDF5", "npz": "NumPy zip", "gz": "gzip", "zip": "zip", "bz2": "bzip2", "xz": "xz",
                 "zst": "zstandard"}
#: What the vector formats are, in words (for the refusals).
VECTOR_FORMATS = "JSON lines (.jsonl, the default) or a NumPy array (.npy, with its row ids in X.ids.json)"


def output_format(output: str | None, asked: str | None) -> str:
    """``asked``, else from ``output``'s suffix (``.csv``, ``.tsv``, ``.npy``), else ``jsonl``. Raises
    ``TinyplmError`` for an unknown format asked, or a suffix of another format (:data:`OTHER_FORMATS`)."""
    if asked is not None:
        if asked not in OUTPUT_FORMATS:
            raise TinyplmError(f"--format: expected one of {', '.join(OUTPUT_FORMATS)}, got {asked!r}")
        return asked
    suffix = Path(output).suffix.lower().lstrip(".") if output else ""
    if suffix in OTHER_FORMATS:
        raise TinyplmError(f"--output {output}: .{suffix} names a format predict does not write "
                           f"({OTHER_FORMATS[suffix]}); expected {', '.join(OUTPUT_FORMATS)} (from the suffix or "
                           "--format), or another name for JSON lines")
    return suffix if suffix in OUTPUT_FORMATS else "jsonl"


def check_output(fmt: str, info: ModelInfo, to_stdout: bool, output: str | None = None) -> None:
    """Raise ``TinyplmError`` for a format the model's head cannot be written in: CSV/TSV for a head
    without columns (an embedding model's vectors), ``npy`` for a head without vectors, or to stdout
    or a stream (``output``, :func:`is_stream`)."""
    if fmt in ("csv", "tsv") and info.head not in COLUMNS:
        raise TinyplmError(f"--format {fmt}: a {info.head} model's predictions are vectors, which CSV/TSV does not "
                           f"hold; write {VECTOR_FORMATS}")
    if fmt in ARRAY_FORMATS and info.head not in ARRAYS:
        raise TinyplmError(f"--format {fmt}: only an embedding model's vectors make an array; a {info.head} "
                           f"model's predictions are written as jsonl, csv or tsv")
    if fmt in ARRAY_FORMATS and to_stdout:
        raise TinyplmError(f"--format {fmt}: an array is written to a file: name it with --output X.{fmt}")
    if fmt in ARRAY_FORMATS and output is not None and is_stream(output):
        raise TinyplmError(f"--output {output}: not a file (a device or pipe); an array and its ids file "
                           f"are written as files: name one with --output X.{fmt}")


def ids_path(output: str | Path) -> Path:
    """The side file of an array output ``X.npy``: ``X.ids.json`` (the row ids, see the module docstring)."""
    output = Path(output)
    return output.with_name(output.name.removesuffix(".npy") + ".ids.json")


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


#: The array row of each head's prediction (a vector ``(dim,)``); heads without one write no arrays.
ARRAYS: PerHead = PerHead("array rows", {Head.EMBEDDING: lambda pred: pred.vector})


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


class ArrayWriter:
    """Gathers an embedding model's vectors and their rows' ids, and writes them on :meth:`close`: a
    float32 ``(n, dim)`` ``.npy`` at ``path`` and its ids at :func:`ids_path` (see the module docstring)."""

    def __init__(self, path: Path, info: ModelInfo, keys: tuple[str, ...] = ()) -> None:
        self.path, self.row_of, self.dimension = Path(path), ARRAYS[info.head], info.dimension or 0
        self.vectors: list[tuple[float, ...]] = []
        self.ids: list[dict] = []

    def write(self, row: Row, pred: Prediction) -> None:
        self.vectors.append(self.row_of(pred))
        self.ids.append({"line": row.line, **(row.key or {})})

    def close(self) -> None:
        """Write both files, each atomically; neither is replaced unless both were written."""
        array = np.asarray(self.vectors, dtype=np.float32)
        if not self.vectors:  # no rows: still the model's width, as a reader of the file expects
            array = array.reshape(0, self.dimension)
        with atomic_path(self.path) as tmp, atomic_path(ids_path(self.path)) as tmp_ids:
            with tmp.open("wb") as fh:
                np.save(fh, array)
            tmp_ids.write_text(json.dumps(self.ids, ensure_ascii=False) + "\n", encoding="utf-8")


@contextlib.contextmanager
def opened_writer(output: str | None, fmt: str, info: ModelInfo, stdout: TextIO, with_line: bool = True,
                  keys: tuple[str, ...] = ()):
    """The writer of ``fmt`` into ``output`` (None: ``stdout``), its file or files written atomically
    when the block ends without an exception (see the module docstring)."""
    check_output(fmt, info, output is None, output)
    if fmt in ARRAY_FORMATS:
        writer = ArrayWriter(Path(output), info, keys)
        yield writer
        writer.close()
        return
    if output is None:
        yield Writer(stdout, fmt, info, with_line, keys)
        return
    with output_file(output) as fh:
        yield Writer(fh, fmt, info, with_line, keys)


#: Names of the process's own streams, whatever they point at (a terminal, a pipe, or the regular
#: file a shell redirected them to: that file is written into, not replaced).
STREAM_NAMES = re.compile(r"/dev/(?:stdout|stderr|fd/\d+)|/proc/self/fd/\d+")


def is_stream(path: str | Path) -> bool:
    """Whether ``path`` names a stream, not a file (see the module docstring): one of the process's
    own (:data:`STREAM_NAMES`, by name), or an existing character device, pipe or socket (links
    followed). A block device is not one (:func:`is_disk`)."""
    if STREAM_NAMES.fullmatch(os.path.normpath(os.path.abspath(path))):
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def is_disk(path: str | Path) -> bool:
    """Whether ``path`` is (or links to) a block device (``/dev/sda``): written into, it would lose
    what the disk holds."""
    try:
        return stat.S_ISBLK(os.stat(path).st_mode)
    except OSError:
        return False


@contextlib.contextmanager
def output_file(path: str | Path) -> Iterator[TextIO]:
    """``path`` open for its new text (see the module docstring): a stream written into as it is
    (appended to), else the file (a link's target) replaced atomically when the block ends without an exception."""
    if is_stream(path):  # for append: a regular file behind a shell's >> keeps what it held
        with open(path, "a", encoding="utf-8", newline="") as fh:
            yield fh
        return
    with atomic_open(Path(path).resolve()) as fh:
        yield fh
