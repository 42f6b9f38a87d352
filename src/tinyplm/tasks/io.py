"""Small helpers of the task readers' messages and text checks; the readers themselves, one per
input format, are in :mod:`tinyplm.tasks.readers`.

Every error message starts with ``<path>`` or ``<path>:<line>`` (1-based) and says what was expected.
"""

from __future__ import annotations

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


def encodable(text: str) -> bool:
    """True when ``text`` can be written as UTF-8 (it holds no unpaired surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def quoted(value: str, quote: str = "'", limit: int = 60) -> str:
    """``value`` for an error message: in ``quote`` marks, or as ``repr`` when it holds a line
    break or another unprintable character (so the message stays one line); cut to ``limit``."""
    if not value:
        return "''"
    value = value if len(value) <= limit else value[:limit] + "..."
    return f"{quote}{value}{quote}" if value.isprintable() else repr(value)


def no_examples(path: Path, detail: str = "") -> DataError:
    """The error for a file with no example rows (empty, or a header only)."""
    suffix = f" ({detail})" if detail else ""
    return DataError(f"{path}: holds no examples{suffix}")
