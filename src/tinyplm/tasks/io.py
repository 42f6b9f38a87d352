"""Low-level file reading shared by the task readers, with file:line error messages.

Every helper raises :class:`~tinyplm.errors.DataError` whose message starts with ``<path>`` or
``<path>:<line>`` (1-based) and says what was expected.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from pathlib import Path

from tinyplm.errors import DataError

BOM = "\ufeff"


def at(path: Path, line: int | None = None) -> str:
    """The location prefix of an error message: ``path`` or ``path:line``."""
    return f"{path}" if line is None else f"{path}:{line}"


def read_text(path: Path) -> str:
    """Read a whole file as UTF-8 text, without a leading BOM.

    Line endings are left as they are (``\\r\\n`` is handled by the row readers).
    Raises ``DataError`` when the file is missing or holds bytes that are not valid UTF-8; the
    message names the line and column of the first bad byte.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a folder, expected a file") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise DataError(
            f"{at(path, line)}: not valid UTF-8 (byte 0x{data[err.start]:02x} at column "
            f"{column}); save the file as UTF-8"
        ) from None
    return text.removeprefix(BOM)


def tsv_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(line, fields)`` for every non-blank line of a tab-separated file.

    Read with ``csv`` and ``quoting=csv.QUOTE_NONE``: GLUE files do not escape quote characters,
    so a ``"`` is an ordinary character and every record is exactly one line. ``line`` is 1-based
    and counts blank lines too. Accepts LF and CRLF line endings. Raises ``DataError``.
    """
    lines = [line.removesuffix("\r") for line in read_text(path).split("\n")]
    reader = csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            raise DataError(f"{at(path, reader.line_num)}: cannot split the line ({err})") from None
        if row:
            yield reader.line_num, row


def require_text(value: str | None, column: str, path: Path, line: int) -> str:
    """Return ``value`` unchanged; raise ``DataError`` when it is missing or only whitespace."""
    if value is None or not value.strip():
        raise DataError(f"{at(path, line)}: empty text in column '{column}'")
    return value


def parse_label(raw: str, labels: tuple[str, ...], path: Path, line: int) -> int:
    """Map a label string to its class index in ``labels``; raise ``DataError`` if unknown."""
    value = raw.strip()
    try:
        return labels.index(value)
    except ValueError:
        shown = ", ".join(labels)
        raise DataError(f"{at(path, line)}: label '{value}' is not one of {shown}") from None


def parse_score(
    raw: str, path: Path, line: int, bounds: tuple[float, float] | None = None
) -> float:
    """Parse a regression score; raise ``DataError`` if it is not a finite number in ``bounds``."""
    value = raw.strip()
    try:
        score = float(value)
    except ValueError:
        score = math.nan
    if not math.isfinite(score):
        raise DataError(f"{at(path, line)}: score '{value}' is not a number")
    if bounds is not None and not bounds[0] <= score <= bounds[1]:
        low, high = bounds
        raise DataError(f"{at(path, line)}: score {value} is outside [{low:g}, {high:g}]")
    return score


def check_columns(
    path: Path, found: list[str], required: list[str], what: str = "column"
) -> dict[str, int]:
    """Return column name -> index (first occurrence) after checking every required name exists.

    Raises ``DataError`` naming the file, the missing column and the columns found.
    """
    index: dict[str, int] = {}
    for i, name in enumerate(found):
        index.setdefault(name.strip(), i)
    for name in required:
        if name not in index:
            shown = ", ".join(repr(c) for c in found) or "none"
            raise DataError(f"{at(path, 1)}: missing {what} '{name}'; found {what}s: {shown}")
    return index


def no_examples(path: Path, detail: str = "") -> DataError:
    """The error for a file with no example rows (empty, or a header only)."""
    suffix = f" ({detail})" if detail else ""
    return DataError(f"{path}: holds no examples{suffix}")
