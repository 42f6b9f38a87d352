"""Low-level file reading shared by the task readers, with file:line error messages.

Every helper raises :class:`~tinyplm.errors.DataError` whose message starts with ``<path>`` or
``<path>:<line>`` (1-based) and says what was expected.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from pathlib import Path

from tinyplm.errors import DataError, TinyplmError
from tinyplm.files import read_utf8

BOM = "\ufeff"


def at(path: Path, line: int | None = None) -> str:
    """The location prefix of an error message: ``path`` or ``path:line``."""
    return f"{path}" if line is None else f"{path}:{line}"


def read_text(path: Path, error: type[TinyplmError] = DataError) -> str:
    """Read a whole file as UTF-8 text, without a leading BOM (see :func:`tinyplm.files.read_utf8`).

    Line endings are left as they are (``\\r\\n`` is handled by the row readers).
    """
    return read_utf8(path, error)


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line, text)`` for every line of a UTF-8 file (1-based; a ``\\r`` before the line
    end is dropped). Raises ``DataError`` like :func:`read_text`."""
    for number, line in enumerate(read_text(path).split("\n"), start=1):
        yield number, line.removesuffix("\r")


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
    """Return ``value`` unchanged; raise ``DataError`` when it is missing, only whitespace, or
    holds an unpaired surrogate (a JSON escape such as ``\\ud800`` that no tokenizer accepts)."""
    if value is None or not value.strip():
        raise DataError(f"{at(path, line)}: empty text in column '{column}'")
    if not encodable(value):
        raise DataError(f"{at(path, line)}: column '{column}' holds an unpaired surrogate escape "
                        "(\\ud800-\\udfff), which is not a character; fix the escape")
    return value


def encodable(text: str) -> bool:
    """True when ``text`` can be written as UTF-8 (it holds no unpaired surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_label(raw: str, labels: tuple[str, ...], path: Path, line: int, source: Path | None = None) -> int:
    """Map a label string to its class index in ``labels``; raise ``DataError`` if unknown.

    ``source`` is the file the labels were inferred from, named in the message when it is not ``path``.
    """
    value = raw.strip()
    try:
        return labels.index(value)
    except ValueError:
        shown = ", ".join(quoted(label, "") for label in labels[:20])
        if len(labels) > 20:
            shown += f" ... ({len(labels)} labels)"
        origin = f" (the labels found in {source})" if source is not None and source != path else ""
        raise DataError(f"{at(path, line)}: label {quoted(value)} is not one of {shown}{origin}") from None


def quoted(value: str, quote: str = "'", limit: int = 60) -> str:
    """``value`` for an error message: in ``quote`` marks, or as ``repr`` when it holds a line
    break or another unprintable character (so the message stays one line); cut to ``limit``."""
    if not value:
        return "''"
    value = value if len(value) <= limit else value[:limit] + "..."
    return f"{quote}{value}{quote}" if value.isprintable() else repr(value)


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
        raise DataError(f"{at(path, line)}: score {quoted(value)} is not a number")
    if bounds is not None and not bounds[0] <= score <= bounds[1]:
        low, high = bounds
        raise DataError(f"{at(path, line)}: score {quoted(value, '')} is outside [{low:g}, {high:g}]")
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
