"""The one plain-text reader: one example per line (a tagger's line split into words on whitespace)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace

from tinyplm.tasks.base import Example
from tinyplm.tasks.conll import Sentence
from tinyplm.tasks.readers.fields import check_text
from tinyplm.tasks.readers.rows import Line, Row, RowError, line_rows


def read_text_lines(lines: Iterable[Line], name: str, words: bool = False) -> Iterator[Row]:
    """One row per line of ``lines``, its item an :class:`Example` of the line's text (no label), or
    with ``words`` a :class:`Sentence` of its words; an undecodable, blank or unusable line is an
    error row naming it (``name`` is the file in messages)."""
    for row in line_rows(lines, name):
        if row.error is not None:
            yield row
            continue
        try:
            if not row.item.strip():
                raise RowError("empty text (a blank line)")
            if "\r" in row.item:  # only \n (or \r\n) ends a line
                raise RowError("holds a carriage return (\\r) inside the line: a file whose lines end in \\r alone "
                               "(old Mac line ends) reads as one line; save it with \\n or \\r\\n line ends")
            text = check_text(row.item, "the line")
        except RowError as exc:
            yield replace(row, item=None, error=f"{row.where}: {exc}")
            continue
        yield replace(row, item=Sentence(tuple(text.split()), (), row.line) if words else Example(text, None, None,
                                                                                                   row.line))
