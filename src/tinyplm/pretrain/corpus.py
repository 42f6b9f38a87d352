"""Unlabelled text for general distillation, MLM-head fitting and word2vec: files -> items.

Three layouts are understood, chosen per file:

* **books** (Project Gutenberg novels, any plain text): the licence header and footer are cut at
  the ``*** START OF`` / ``*** END OF`` marker lines (:func:`strip_gutenberg`); the rest is split
  into blank-line separated paragraphs, whitespace collapsed; a text without any blank line (a file
  of one sentence or review per line) into its lines instead, since read as one paragraph it would
  be one item, cut to its first ``max_length`` pieces. A paragraph longer than ``MAX_CHARS`` is cut at
  sentence ends into pieces of at most ~``MAX_CHARS`` characters (a sentence longer than that at
  spaces).
* **wikitext** (a file whose first non-blank line is a `` = Title = `` heading): one item per
  non-blank, non-heading line; the tokenised ``@-@``, ``@,@``, ``@.@`` joiners are undone and
  ``<unk>`` becomes ``[UNK]``.
* **tables** (a file ending ``.csv``, ``.tsv``, ``.jsonl`` or ``.json``, named as a file): one item per row,
  its ``text_field`` column (:mod:`tinyplm.pretrain.corpus_tables`).

Items shorter than ``min_chars`` are dropped. Files are decoded as strict UTF-8 (a BOM is
dropped, CRLF and CR become LF), or as UTF-16 when they open with its byte-order mark (what Windows
calls "Unicode"); a gzip file (``.gz``: its ending before that says its layout) is read decompressed.
Another compressed or non-UTF-8 file is refused naming the file and what to do.
"""

from __future__ import annotations

import gzip
import random
import re
import zlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from tinyplm.errors import DataError, TinyplmError
from tinyplm.pretrain.corpus_tables import is_table, table_items, table_pairs

T = TypeVar("T")

#: Paragraphs longer than this many characters are cut at sentence ends.
MAX_CHARS = 1000

_START = re.compile(r"^\*\*\* ?START OF", re.MULTILINE)
_END = re.compile(r"^\*\*\* ?END OF", re.MULTILINE)
_BLANK_LINES = re.compile(r"\n[ \t]*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WIKI_HEADING = re.compile(r"^\s*(=+) .* \1\s*$")
_WIKI_JOINERS = (("@-@", "-"), ("@,@", ","), ("@.@", "."))


def _normalise(text: str) -> str:
    """Drop a leading BOM and turn CRLF / CR line ends into LF."""
    return text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def strip_gutenberg(text: str) -> str:
    """Keep only the text between the ``*** START OF`` and ``*** END OF`` marker lines.

    The marker lines themselves are dropped. Text without a START marker is returned whole; text
    with a START but no END marker is kept to its end. A BOM is removed and CRLF becomes LF.
    """
    text = _normalise(text)
    start = _START.search(text)
    if start is None:
        return text
    body_from = text.find("\n", start.end())
    if body_from < 0:
        return ""
    end = _END.search(text, body_from)
    return text[body_from + 1 : end.start() if end else len(text)]


def _chunks(paragraph: str, max_chars: int) -> Iterator[str]:
    """Cut a long paragraph at sentence ends into pieces of about ``max_chars`` at most (a sentence
    longer than that at spaces; a single word longer than that stays whole)."""
    if len(paragraph) <= max_chars:
        yield paragraph
        return
    sentences = (part for s in _SENTENCE_END.split(paragraph)
                 for part in ([s] if len(s) <= max_chars else _packed(s.split(" "), max_chars)))
    yield from _packed(sentences, max_chars)


def _packed(parts: Iterable[str], max_chars: int) -> Iterator[str]:
    """``parts`` joined by spaces, greedily, into pieces of at most ``max_chars`` characters (a part
    longer than that alone)."""
    piece = ""
    for part in parts:
        if piece and len(piece) + 1 + len(part) > max_chars:
            yield piece
            piece = part
        else:
            piece = f"{piece} {part}" if piece else part
    if piece:
        yield piece


def book_items(text: str, min_chars: int = 20) -> list[str]:
    """Gutenberg/plain text -> whitespace-collapsed paragraphs (long ones cut at sentence ends); a
    text without a blank line -> its lines (see the module docstring)."""
    out: list[str] = []
    body = strip_gutenberg(text).strip("\n")  # blank lines at either end separate nothing
    paragraphs = _BLANK_LINES.split(body)
    if len(paragraphs) == 1:  # no blank line at all: one text per line, not one paragraph of them all
        paragraphs = body.split("\n")
    for para in paragraphs:
        flat = " ".join(para.split())
        out.extend(c for c in _chunks(flat, MAX_CHARS) if len(c) >= min_chars)
    return out


def is_wikitext(text: str) -> bool:
    """True when the first non-blank line is a wikitext `` = Title = `` heading."""
    for line in text.split("\n", 50)[:50]:
        if line.strip():
            return bool(_WIKI_HEADING.match(line))
    return False


def wikitext_items(text: str, min_chars: int = 20) -> list[str]:
    """Wikitext -> one item per non-blank, non-heading line (``@-@`` joiners undone)."""
    out: list[str] = []
    for line in _normalise(text).split("\n"):
        if not line.strip() or _WIKI_HEADING.match(line):
            continue
        for marked, plain in _WIKI_JOINERS:
            line = line.replace(f" {marked} ", plain)
        flat = " ".join(line.replace("<unk>", "[UNK]").split())
        if len(flat) >= min_chars:
            out.append(flat)
    return out


#: The opening bytes of compressed files read as nothing else, and their names.
_PACKED = {b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz", b"PK\x03\x04": "zip", b"(\xb5/\xfd": "zstandard",
           b"7z\xbc\xaf\x27\x1c": "7-Zip"}


def _read_text(path: Path) -> str:
    """A corpus file's text (see the module docstring); ``DataError`` names the file, and the line
    of a byte that is not UTF-8."""
    try:
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(f"{path}: cannot be read ({exc})") from None
    packed = next((name for magic, name in _PACKED.items() if data.startswith(magic)), None)
    if data[257:262] == b"ustar":  # a tar archive's mark sits after its first file's name
        packed = "tar"
    if packed:
        raise DataError(f"{path}: a {packed} archive, not text; unpack it and give the text files (gzip files are "
                        "read as they are)")
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise DataError(f"{path}: opens as UTF-16 but byte {exc.start} is not; save it as UTF-8") from None
    if b"\x00" in data:  # valid UTF-8, but no text holds it: a binary file (an image, a model)
        line = data[: data.index(b"\x00")].count(b"\n") + 1
        raise DataError(f"{path}:{line}: holds NUL bytes, so it is not a text file; leave it out of the corpus")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start}); save "
                        "it as UTF-8 (e.g. iconv -f latin1 -t utf-8), or leave out a file that is not text") from None


def corpus_files(paths: Sequence[Path]) -> list[Path]:
    """Files and directories -> the files to read (directories: every ``*.txt`` and ``*.txt.gz``
    below, sorted).

    Raises ``DataError`` for a missing path or a directory without ``.txt`` files.
    """
    files: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.name.lower().endswith((".txt", ".txt.gz")))
            if not found:
                raise DataError(f"{path}: directory holds no .txt files (nor .txt.gz)")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise DataError(f"{path}: corpus file or directory not found")
    return files


def read_documents(paths: Sequence[Path], min_chars: int = 20, max_items: int | None = None,
                   text_field: str | None = None) -> list[list[str]]:
    """Text files and directories -> text items grouped by document: a book file is one document,
    a wikitext file one document per top-level `` = Title = `` article (sentence pairs for NSP and
    SOP are built inside a document), a table (CSV, TSV, JSON lines) one document of its rows'
    ``text_field``. ``max_items`` bounds the items over all documents (files in the given, then
    sorted, order). Raises ``DataError`` naming a missing path, a non-UTF-8 file (with its line), a
    table without ``text_field``, or when nothing of at least ``min_chars`` characters is found.
    """
    docs: list[list[str]] = []
    total = 0
    for path in corpus_files(paths):
        text = _normalise(_read_text(path))
        parts = [text] if is_table(path) or not is_wikitext(text) else _wiki_articles(text)
        for part in parts:
            items = (table_items(path, part, text_field, min_chars) if is_table(path)
                     else wikitext_items(part, min_chars) if is_wikitext(part) else book_items(part, min_chars))
            if max_items is not None:
                items = items[: max_items - total]
            if items:
                docs.append(items)
                total += len(items)
            if max_items is not None and total >= max_items:
                return docs
    if not docs:
        shown = ", ".join(str(p) for p in paths)
        raise DataError(f"{shown}: no text items of at least {min_chars} characters found")
    return docs


def _wiki_articles(text: str) -> list[str]:
    """Wikitext -> one string per top-level article (each starts with its `` = Title = `` line)."""
    out, current = [], []
    for line in text.split("\n"):
        heading = _WIKI_HEADING.match(line)
        if heading and len(heading.group(1)) == 1 and current:
            out.append("\n".join(current))
            current = []
        current.append(line)
    if current:
        out.append("\n".join(current))
    return out


def read_corpus(paths: Sequence[Path], min_chars: int = 20, max_docs: int | None = None,
                text_field: str | None = None) -> list[str]:
    """Read text files and directories into a list of text items (paragraphs, lines or table rows'
    ``text_field``).

    ``max_docs`` stops after that many items (files are read in the given, then sorted, order).
    Raises ``DataError`` naming a missing path, a non-UTF-8 file (with its line), a table without
    ``text_field``, or when nothing of at least ``min_chars`` characters is found.
    """
    return [item for doc in read_documents(paths, min_chars, max_docs, text_field) for item in doc]


def read_corpus_pairs(paths: Sequence[Path], text_field: str, pair_field: str,
                      max_docs: int | None = None) -> list[tuple[str, str]]:
    """``(text_field, pair_field)`` of every row of the tables at ``paths`` whose two cells hold text,
    at most ``max_docs`` of them (files in the given, then sorted, order). Raises ``DataError``
    naming a path that is not a table (a text file, or a folder's: they hold single texts), a table
    without either field (with its line), or when no row holds both."""
    pairs: list[tuple[str, str]] = []
    for path in corpus_files(paths):
        if not is_table(path):
            raise DataError(f"{path}: not a table; pairs of texts (corpus.pair_field) are read from .csv, .tsv, "
                            ".jsonl or .json files, each row's text_field and pair_field")
        pairs += table_pairs(path, _normalise(_read_text(path)), text_field, pair_field)
        if max_docs is not None and len(pairs) >= max_docs:
            return pairs[:max_docs]
    if not pairs:
        shown = ", ".join(str(p) for p in paths)
        raise DataError(f"{shown}: no row holds text in both {text_field!r} and {pair_field!r}")
    return pairs


def split_holdout(items: Sequence[T], fraction: float, seed: int = 0) -> tuple[list[T], list[T]]:
    """Deterministic random split -> (train, held); both keep the input order.

    ``held`` has ``round(fraction * len(items))`` items (at least 1 when ``fraction > 0`` and
    there are 2 or more items). Raises ``TinyplmError`` unless ``0 <= fraction < 1``.
    """
    if not 0.0 <= fraction < 1.0:
        raise TinyplmError(f"holdout fraction must be in [0, 1), got {fraction}")
    n = len(items)
    n_held = round(fraction * n)
    if fraction > 0 and n >= 2:
        n_held = min(max(n_held, 1), n - 1)
    held_idx = set(random.Random(seed).sample(range(n), n_held))
    train = [x for i, x in enumerate(items) if i not in held_idx]
    held = [x for i, x in enumerate(items) if i in held_idx]
    return train, held
