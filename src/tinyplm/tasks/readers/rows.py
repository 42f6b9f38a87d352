"""The seam of every reader: decoded lines in, :class:`Row` records out, a :class:`Policy` between.

A reader never raises for one bad record: it yields a :class:`Row` with an ``error`` that names the
file and line (or JSON path) and what was expected. The :class:`Policy` then decides: ``raise``
(training and evaluation: the first bad row is a :class:`~tinyplm.errors.DataError`) or ``skip``
(prediction: the bad row goes on to the caller, who leaves it out and records it). Whether labels
are required is the policy's other half: training needs them, prediction reads them if there.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from tinyplm.errors import DataError

#: What a policy does with a bad row: stop the read, or hand the row on to be recorded and left out.
ON_ERROR = ("raise", "skip")

#: ``(line, text, error)``: a 1-based line, its text without the line break, and why it could not be
#: decoded (None when it could).
Line = tuple[int, str, str | None]


class RowError(ValueError):
    """One record cannot be an example (the message names the field and what was expected; the
    reader adds the file and line)."""


@dataclass(frozen=True)
class Row:
    """One record: its 1-based ``line`` (a record's first line; 0 in a JSON document), ``where`` it is
    for messages (``file:line``, or ``file: data[0].paragraphs[1].qas[2]``), and either the ``item``
    or the ``error`` (a whole message) that kept it from being one. ``key`` holds the fields that tell
    apart several records of one line (a review's ``review_id`` and ``sentence`` number)."""

    line: int
    where: str
    item: Any = None
    error: str | None = None
    key: dict[str, object] | None = None


@dataclass(frozen=True)
class Policy:
    """How a read treats bad rows (``on_error``, one of :data:`ON_ERROR`) and labels (``labels``:
    required, or read only where present); ``hint`` is added to the message of a raised row."""

    on_error: str = "raise"
    labels: bool = True
    hint: str = ""

    def __post_init__(self) -> None:
        if self.on_error not in ON_ERROR:
            raise ValueError(f"on_error: expected one of {', '.join(ON_ERROR)}, got {self.on_error!r}")

    def apply(self, rows: Iterable[Row]) -> Iterator[Row]:
        """``rows`` as they come; under ``raise`` the first bad one is a ``DataError`` instead."""
        for row in rows:
            if row.error is not None and self.on_error == "raise":
                raise DataError(row.error + self.hint)
            yield row


#: Training and evaluation: labels required, the first bad row raises.
TRAINING = Policy("raise", labels=True)


def items(rows: Iterable[Row], policy: Policy = TRAINING) -> list:
    """The items of ``rows`` read under ``policy`` (bad rows raise, or are dropped under ``skip``)."""
    return [row.item for row in policy.apply(rows) if row.error is None]


def decoded_lines(stream: Iterable[bytes]) -> Iterator[Line]:
    """``(line, text, error)`` per line of a byte stream: the text without its line break (only
    ``\\n`` ends a line; a ``\\r`` before it is dropped; a BOM on the first line too). An undecodable
    line comes with ``error`` naming the byte and column, its text decoded with ``surrogateescape``
    (never a valid text: :func:`~tinyplm.tasks.readers.fields.check_text` refuses it)."""
    for number, raw in enumerate(stream, start=1):
        raw = raw.removesuffix(b"\n").removesuffix(b"\r")
        if number == 1:
            raw = raw.removeprefix(b"\xef\xbb\xbf")
        try:
            yield number, raw.decode("utf-8"), None
        except UnicodeDecodeError as err:
            yield (number, raw.decode("utf-8", "surrogateescape"),
                   f"not valid UTF-8 (byte 0x{raw[err.start]:02x} at column {err.start + 1}); save the file as UTF-8")


@contextmanager
def opened(path: Path | str, what: str = "file") -> Iterator[BinaryIO]:
    """``path`` opened for reading bytes; raises ``DataError`` naming it (``what``: how a message
    calls it) when it is missing, a folder or unreadable."""
    try:
        fh = open(path, "rb")  # closed by the with below
    except FileNotFoundError:
        raise DataError(f"{path}: {what} not found") from None
    except IsADirectoryError:
        article = "an" if what[:1] in "aeiou" else "a"
        raise DataError(f"{path}: is a folder, expected {article} {what}") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    with fh:
        yield fh


def file_lines(path: Path) -> Iterator[Line]:
    """The :func:`decoded_lines` of the file at ``path`` (raises ``DataError`` when it cannot be opened)."""
    with opened(path) as fh:
        yield from decoded_lines(fh)


def line_rows(lines: Iterable[Line], name: str) -> Iterator[Row]:
    """One row per line, its item the line's text; an undecodable line is an error row naming it."""
    for line, text, error in lines:
        where = f"{name}:{line}"
        yield Row(line, where, error=f"{where}: {error}") if error else Row(line, where, text)


def whole_text(lines: Iterable[Line], name: str) -> str:
    """The text of ``lines`` joined by ``\\n``; raises ``DataError`` at the first undecodable line (a
    document such as JSON is read whole, so one bad byte spoils it)."""
    parts = []
    for line, text, error in lines:
        if error:
            raise DataError(f"{name}:{line}: {error}")
        parts.append(text)
    return "\n".join(parts)
