"""CoNLL-2003 named entities: read ``token POS chunk NER`` files (IOB2 tags).

A blank line ends a sentence; ``-DOCSTART-`` lines separate documents and are dropped. Every line
must have exactly four space-separated columns and a tag from :data:`TAGS`; otherwise a
:class:`DataError` names the file, the line and what was expected.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tinyplm.errors import DataError
from tinyplm.tasks.heads import Head
from tinyplm.tasks.io import text_lines

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
    known = set(tags)
    out: list[Sentence] = []
    rows: list[list[str]] = []  # the current sentence's lines: token POS chunk NER
    first = 0
    for n, line in text_lines(path):
        parts = line.split()
        if not parts or parts[0] == "-DOCSTART-":
            if rows:
                out.append(_sentence(rows, first))
                rows = []
            continue
        _check_line(parts, known, tags, path, n, line)
        if not rows:
            first = n
        rows.append(parts)
    if rows:
        out.append(_sentence(rows, first))
    if not out:
        raise DataError(f"{path}: no sentences found (expected lines of 'token POS chunk NER')")
    return out


def _sentence(rows: list[list[str]], first: int) -> Sentence:
    """A Sentence from its checked lines' columns (token POS chunk NER)."""
    token, pos, chunk, ner = (tuple(column) for column in zip(*rows, strict=True))
    return Sentence(token, ner, first, pos, chunk)


def _check_line(parts: list[str], known: set[str], tags: tuple[str, ...], path: Path, n: int, line: str) -> None:
    """Raise ``DataError`` (file:line) unless ``parts`` are four columns ending in a known tag."""
    if len(parts) != COLUMNS:
        raise DataError(f"{path}:{n}: expected {COLUMNS} space-separated columns (token POS chunk NER), "
                        f"got {len(parts)}: {line.strip()[:80]!r}")
    if parts[3] not in known:
        raise DataError(f"{path}:{n}: unknown NER tag {parts[3][:40]!r}; expected one of {', '.join(tags)}")


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
