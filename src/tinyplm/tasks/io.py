"""Small helpers of the task readers' messages and text checks; the readers themselves, one per
input format, are in :mod:`tinyplm.tasks.readers`.

Every error message starts with ``<path>`` or ``<path>:<line>`` (1-based) and says what was expected.
"""

from __future__ import annotations

import unicodedata
from functools import cache
from pathlib import Path

from tinyplm.errors import DataError, TinyplmError
from tinyplm.files import read_utf8

BOM = "\ufeff"
#: Whitespace as Python's ``str.isspace`` has it (ASCII's, the no-break and other Unicode spaces), spelled
#: out so that serve's JSON Schema patterns state the same set (``\\s`` means different sets to
#: Python, Rust and ECMA regexes).
SPACE = "\t\n\v\f\r \x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"


@cache
def invisible() -> str:
    """The invisible format characters of the Basic Multilingual Plane (Unicode category Cf: zero-width
    space and joiners, the BOM, the soft hyphen, direction marks), as a regex class body; a text of
    these and whitespace alone shows nothing, and BERT's normaliser deletes them (an empty text to
    the model). Those past the BMP are left out, as ECMA patterns without the ``u`` flag cannot hold
    them. Found on first use (a scan of the BMP), not when a command starts."""
    return "".join(chr(c) for c in range(0x10000) if unicodedata.category(chr(c)) == "Cf")


def has_visible(text: str) -> bool:
    """True when ``text`` holds a character that is neither whitespace (:data:`SPACE`) nor an
    invisible format character (:func:`invisible`'s set, tested one character at a time): the one
    rule of an empty text, for training files, ``predict`` and ``serve`` alike."""
    for c in text:
        if c.isspace():
            continue
        if c.isascii() or ord(c) > 0xFFFF or unicodedata.category(c) != "Cf":
            return True
    return False


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
