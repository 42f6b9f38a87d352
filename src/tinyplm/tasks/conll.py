"""CoNLL-2003 named entities: read ``token POS chunk NER`` files (IOB2 tags).

A blank line ends a sentence; ``-DOCSTART-`` lines separate documents and are dropped. Every line
must have exactly four space-separated columns and a tag from :data:`TAGS`; otherwise a
:class:`DataError` names the file, the line and what was expected.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tinyplm.errors import DataError
from tinyplm.tasks.heads import Head
from tinyplm.tasks.readers.rows import Line, Row, file_lines, items

ENTITY_TYPES = ("PER", "ORG", "LOC", "MISC")
TAGS: tuple[str, ...] = ("O",) + tuple(f"{p}-{t}" for t in ENTITY_TYPES for p in ("B", "I"))
COLUMNS = 4


@dataclass(frozen=True)
class Sentence:
    """One sentence: its tokens and NER tags (same length), and its first line in the file; read
    from a file, also its POS tags and chunk tags (the file's 2nd and 3rd columns, for probing)."""

    tokens: tuple[str, ...]
    tags: tuple[str, ...]
    line: int
    pos: tuple[str, ...] = ()
    chunk: tuple[str, ...] = ()


def read_conll(path: Path, tags: tuple[str, ...] = TAGS) -> list[Sentence]:
    """Sentences of a CoNLL-2003 file (UTF-8; a leading BOM and CRLF line ends are accepted).

    Raises ``DataError`` naming the file and line for a missing file, bytes that are not UTF-8,
    a wrong column count or an unknown tag, and naming the file when it holds no sentence."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: CoNLL file not found")
    out = items(conll_rows(file_lines(path), path, tags))
    if not out:
        raise DataError(f"{path}: no sentences found (expected lines of 'token POS chunk NER')")
    return out


def conll_rows(lines: Iterable[Line], name: Path | str, tags: tuple[str, ...] | None) -> Iterator[Row]:
    """One row per sentence of CoNLL-style ``lines`` (a blank line ends a sentence; ``-DOCSTART-``
    lines are dropped), located at its first line. With ``tags`` (labels required) every line must be
    ``token POS chunk NER`` with a tag of ``tags``; without, a line's first column is its word, and
    its tags are read where the line has all four columns. A sentence with a bad line is an error
    row naming that line."""
    known = set(tags or ())
    words: list[list[str]] = []  # the current sentence's lines, split
    first, problem = 0, None
    for n, line, error in lines:
        parts = line.split()
        if not parts or parts[0] == "-DOCSTART-":
            if words or problem:
                yield _sentence_row(words, first, problem, name, tags is not None)
            words, problem = [], None
            continue
        if not words and not problem:
            first = n
        if problem is None:  # a sentence is located by its first bad line
            problem = f"{name}:{n}: {error}" if error else _line_problem(parts, known, tags, name, n, line)
        words.append(parts)
    if words or problem:
        yield _sentence_row(words, first, problem, name, tags is not None)


def _sentence_row(rows: list[list[str]], first: int, problem: str | None, name: Path | str, labels: bool) -> Row:
    """A row of one sentence from its lines' columns (token POS chunk NER), or its first problem."""
    where = f"{name}:{first}"
    if problem:
        return Row(first, where, error=problem)
    if labels or all(len(parts) == COLUMNS for parts in rows):
        token, pos, chunk, ner = (tuple(column) for column in zip(*rows, strict=True))
        return Row(first, where, Sentence(token, ner, first, pos, chunk))
    return Row(first, where, Sentence(tuple(parts[0] for parts in rows), (), first))


def _line_problem(parts: list[str], known: set[str], tags: tuple[str, ...] | None, name: Path | str, n: int,
                  line: str) -> str | None:
    """What is wrong with one labelled line (not four columns ending in a known tag), else None."""
    if tags is None:
        return None
    if len(parts) != COLUMNS:
        return (f"{name}:{n}: expected {COLUMNS} space-separated columns (token POS chunk NER), "
                f"got {len(parts)}: {line.strip()[:80]!r}")
    if parts[3] not in known:
        return f"{name}:{n}: unknown NER tag {parts[3][:40]!r}; expected one of {', '.join(tags)}"
    return None


CONLL_DIR = "conll2003"
CONLL_FILES = {"train": "train.txt", "dev": "valid.txt", "test": "test.txt"}


def conll_task(data_root: Path):
    """CoNLL-2003 NER as a :class:`~tinyplm.tasks.base.Task` with a token head: trained on
    ``train.txt``, checkpoints chosen on ``valid.txt`` (``dev``) and reported on ``test.txt`` too
    (its metrics end in ``_test``). Metrics are entity-level F1, precision and recall."""
    from tinyplm.tasks.base import Task

    folder = data_root / CONLL_DIR if (data_root / CONLL_DIR).is_dir() else data_root
    return Task(name="conll2003", labels=TAGS, is_regression=False, metrics=("f1", "precision", "recall"),
                files={split: folder / name for split, name in CONLL_FILES.items()},
                reader=lambda path, split: read_conll(path), eval_splits=("dev", "test"),
                metric_suffix={"test": "_test"}, description="CoNLL-2003 named entities (IOB2), entity-level F1",
                collection="CoNLL-2003", head=Head.TOKEN, options={"tags": TAGS})
