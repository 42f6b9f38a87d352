"""``tinyplm predict``: stream a file of inputs through a :class:`~tinyplm.inference.predictor.Predictor`
into a file of predictions.

Rows are read one at a time and gathered into windows of ``window`` examples; each window is
predicted at once (the predictor sorts it by length into batches, so padding stays small) and
written back in input order, so memory holds one window whatever the file's size. A file that
fits in one window is batched exactly as ``tinyplm evaluate`` batches it.

Output (see :mod:`tinyplm.predict.writers`; an embedding model's vectors as JSON lines or a ``.npy``
array with its row ids beside it) goes to a temporary sibling renamed onto ``output`` only when
every row is done: an error, an interrupt or a ``SIGTERM`` (the command turns it into an exit that
cleans up) leaves no half-written file (and an older file of that name untouched); an output or
side file that cannot be written (a folder, a path under a file, no permission) is refused before
the model reads a row (:func:`writable`). On stdout records stream as they are made. A bad row (see
:mod:`tinyplm.predict.inputs`) stops the run with a ``DataError`` naming it (a file is read through
once before the model runs, :func:`scan_rows`, so a bad row anywhere in it stops the run before
any work; stdin, which can be read only once, is checked as it streams), or, with
``on_error="skip"``, is left out and listed in the side file (JSON lines: ``line``, ``where``,
``error``; written the same atomic way): the ``on_error`` of the readers'
:class:`~tinyplm.tasks.readers.rows.Policy`, the one difference from how training reads.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tinyplm.errors import DataError, TinyplmError
from tinyplm.files import write_problem
from tinyplm.inference.pairs import trained_on
from tinyplm.inference.predictor import NanOutputs, Predictor
from tinyplm.predict.inputs import read_inputs
from tinyplm.predict.sources import STDIN, Row, Source, detect_format, open_binary
from tinyplm.predict.table_inputs import columns_read
from tinyplm.predict.writers import (
    OUTPUT_FORMATS,
    Writer,
    check_output,
    is_disk,
    is_stream,
    opened_writer,
    output_file,
)
from tinyplm.tasks.heads import Head
from tinyplm.tasks.readers.reviews import REVIEW_KEYS
from tinyplm.tasks.readers.rows import ON_ERROR, Policy, decoded_lines

#: Added to the message of a bad row that stops a run (``--on-error raise``).
SKIP_HINT = " (--on-error skip leaves such rows out and lists them)"
#: Examples predicted at once by default: large enough to sort well by length (and to hold all of
#: SST-2 dev, so its batches are evaluate's), small enough that memory does not grow with the file.
WINDOW = 1024


@dataclass(frozen=True)
class PredictJob:
    """One ``predict`` run: the input ``source``, the ``output`` file (None or ``-``: stdout) and its
    format, what to do with a bad row, the side file listing skipped rows, and the window size."""

    source: Source
    output: str | None
    fmt: str = "jsonl"
    on_error: str = "raise"
    skipped: Path | None = None
    window: int = WINDOW

    @property
    def to_stdout(self) -> bool:
        return self.output in (None, STDIN)


@dataclass(frozen=True)
class PredictSummary:
    """What a run did: predictions written, rows skipped, seconds, and where both went."""

    predicted: int
    skipped: int
    seconds: float
    output: str
    skipped_file: str | None
    columns: str | None = None

    @property
    def per_second(self) -> float:
        return self.predicted / self.seconds if self.seconds > 0 else 0.0


#: The input formats whose examples are records of named fields (--text-column/--pair-column pick them).
COLUMN_FORMATS = ("csv", "tsv", "jsonl")


def source_for(info, path: str, input_format: str | None = None, text_column: str | None = None,
               pair_column: str | None = None, header: bool | None = None) -> Source:
    """What ``predict`` reads from ``path`` for the model ``info`` describes: the input's format
    (asked, or from its name and the model's task) and the model's head, task and review context.
    Raises ``TinyplmError`` for --header/--no-header on an input that is not a table, and for
    --text-column/--pair-column on one whose examples have no named fields (plain text, CoNLL,
    SQuAD JSON, reviews), and --pair-column for a model that reads one text (an embedding model, a
    tagger): ignored, they would leave the user believing a column was chosen."""
    fmt = detect_format(path, info.head, input_format, info.task)
    if header is not None and fmt not in ("csv", "tsv"):
        flag = "--header" if header else "--no-header"
        raise TinyplmError(f"{flag}: only for CSV/TSV input; {path} is read as {fmt}")
    named = [flag for flag, given in (("--text-column", text_column), ("--pair-column", pair_column)) if given]
    if named and fmt not in COLUMN_FORMATS:
        raise TinyplmError(f"{' and '.join(named)}: only for input with named fields ({', '.join(COLUMN_FORMATS)}); "
                           f"{path} is read as {fmt}, whose examples have no columns to choose from")
    if pair_column and Head(info.head).row.fields.pair is None:
        raise TinyplmError(f"--pair-column: the model in {info.path} reads one text per example (its {info.head} "
                           "head); leave --pair-column out")
    if pair_column and info.pairs is False:
        raise TinyplmError(f"--pair-column: {trained_on(info.task, False)} ({info.path}); leave --pair-column out")
    if pair_column and (info.context_sentences or info.context_after):
        raise TinyplmError(f"--pair-column: the model in {info.path} reads the texts around each one in the input "
                           "as its second text (its context, as it was trained); leave --pair-column out")
    if info.pairs and fmt == "text":
        raise TinyplmError(f"{path}: {trained_on(info.task, True)} ({info.path}), and plain text holds one text "
                           "per line; give CSV/TSV/JSON lines with a column for each text (by suffix, or "
                           "--input-format)")
    return Source(path, fmt, info.head, text_column, pair_column, info.task, header, info.context_sentences,
                  info.context_after, info.pairs)


def check_options(on_error: str, window: int) -> None:
    """Raise ``TinyplmError`` for an ``--on-error`` or ``--window`` no job can run with (no file read)."""
    if on_error not in ON_ERROR:
        raise TinyplmError(f"--on-error: expected one of {', '.join(ON_ERROR)}, got {on_error!r}")
    if window < 1:
        raise TinyplmError(f"--window: expected at least 1 example, got {window}")


def check_job(job: PredictJob, info=None) -> None:
    """Raise ``TinyplmError`` for a job that cannot run (before any byte is read or written);
    with the model's ``info``, also for an output format its head cannot be written in."""
    if info is not None:
        check_output(job.fmt, info, job.to_stdout, None if job.to_stdout else job.output)
        check_not_the_model(job, info.path)
    check_options(job.on_error, job.window)
    if job.on_error == "skip" and job.skipped is None:
        where = "stdout" if job.to_stdout else f"{job.output}, not a file"
        raise TinyplmError(f"--on-error skip with the output on {where}: name the side file for skipped rows "
                           "with --skipped FILE")
    if not job.to_stdout:
        writable(job.output, "--output")
    if job.skipped is not None:
        writable(str(job.skipped), "--skipped")
    if not job.to_stdout and job.source.path != STDIN and same_file(job.output, job.source.path):
        raise TinyplmError(f"{job.output}: the output would replace the input; choose another --output")
    if job.skipped is not None:
        taken = {"the input": None if job.source.path == STDIN else job.source.path,
                 "the output": None if job.to_stdout else job.output}
        for what, path in taken.items():
            if path is not None and same_file(job.skipped, path):
                raise TinyplmError(f"{job.skipped}: the file of skipped rows would replace {what}; choose another "
                                   "--skipped")


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether writing ``a`` would write over the file ``b``. A stream is written into, not replaced:
    two streams are not one file (``/dev/null`` twice; ``/dev/stdout`` and ``/dev/stderr``, both the
    terminal) unless both are the one regular file a shell redirected them to."""
    if is_stream(a) or is_stream(b):
        return os.path.isfile(a) and os.path.isfile(b) and os.path.samefile(a, b)
    return Path(a).resolve() == Path(b).resolve()


def check_not_the_model(job: PredictJob, model_dir: Path) -> None:
    """Raise ``TinyplmError`` when the output or the file of skipped rows would replace a file of the
    model dir being read (its config.json, its weights, 1_Pooling/config.json): the model would be
    lost. A file is the model's when its path, made absolute, lies in the model dir at any depth, or
    when it resolves to where one of the model dir's files does (a Hugging Face cache's snapshot
    holds links to ``blobs/``)."""
    model = Path(os.path.abspath(model_dir))
    files: dict[Path, Path] = {}  # where each of the model's files resolves to -> its name in the model dir
    for folder, _, names in os.walk(model):
        files.update({Path(folder, name).resolve(): Path(folder, name).relative_to(model) for name in names})
    for flag, path in (("--output", None if job.to_stdout else job.output), ("--skipped", job.skipped)):
        given = Path(os.path.abspath(path)) if path is not None else None
        if given is None or not given.is_file() or given.suffix.lower().lstrip(".") in OUTPUT_FORMATS:
            continue  # predictions written there before (MODEL/preds.jsonl): no model file is in these formats
        name = given.relative_to(model) if given.is_relative_to(model) else files.get(given.resolve())
        if name is not None:
            raise TinyplmError(f"{flag} {path}: would replace {name} of the model in {model_dir}; "
                               "write the predictions elsewhere")


def writable(path: str, flag: str, streams: bool = True) -> None:
    """Raise ``TinyplmError`` naming ``flag`` when ``path`` cannot be written as a new file: empty,
    ending in a slash or a folder already, a block device (a disk), or under a file or a folder this
    user cannot write to (found before the model reads a row, not when the finished predictions are
    moved into place). A stream (:func:`~tinyplm.predict.writers.is_stream`) is written into, so it
    passes when it is open; ``streams`` False refuses it, for callers that write ``path`` atomically
    (``files.write_json_atomic``: a stream cannot be renamed onto)."""
    if not path.strip() or path.endswith(("/", os.sep)):
        raise TinyplmError(f"{flag} {path!r}: expected a file name, not a folder")
    if is_disk(path):
        raise TinyplmError(f"{flag} {path}: a block device (a disk), whose content would be overwritten; name a file")
    if is_stream(path):  # written into as it is (tinyplm.predict.writers), where the caller can
        if not streams:
            raise TinyplmError(f"{flag} {path}: not a file (a device, pipe or terminal); {flag} writes a file, "
                               "replaced whole once it is done: name a file")
        if not os.path.exists(path):
            raise TinyplmError(f"{flag} {path}: no such stream is open in this process; name a file")
        return
    target = Path(path)
    if target.is_dir():
        raise TinyplmError(f"{flag} {path}: is a folder; name a file in it")
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent  # the nearest folder that exists: the rest is created
    if not parent.is_dir():
        raise TinyplmError(f"{flag} {path}: {parent} is a file, not a folder")
    problem = write_problem(parent)
    if problem:
        raise TinyplmError(f"{flag} {path}: cannot write in {parent} ({problem})")


def scan_rows(source: Source) -> int:
    """Read every row of the file ``source`` names (no model) and raise ``DataError`` at the first
    bad one, naming its file and line: run before predicting with ``--on-error raise``, so a bad
    row near the end of a large file stops the run before the model reads anything -> rows read."""
    with open_binary(source.path) as stream:
        return sum(1 for _ in read_inputs(source, stream, Policy("raise", labels=False, hint=SKIP_HINT)))


def predict_file(predictor: Predictor, job: PredictJob, progress: Callable[[int], None] | None = None,
                 stdout: TextIO | None = None) -> PredictSummary:
    """Run ``job`` (see the module docstring); ``progress`` is called with the count of each window
    written. Raises ``DataError`` naming the file and line of a bad row (``on_error="raise"``) or
    an unreadable input, and ``TinyplmError`` for a job :func:`check_job` refuses."""
    check_job(job, predictor.info)
    start, done, skipped = time.perf_counter(), 0, 0
    if job.on_error == "raise" and job.source.path != STDIN:  # stdin is read once: its rows are checked as they come
        scan_rows(job.source)
    out_path = None if job.to_stdout else job.output
    keys = REVIEW_KEYS if job.source.format == "reviews" else ()
    with (open_binary(job.source.path) as stream,
          opened_writer(out_path, job.fmt, predictor.info, stdout or sys.stdout, job.source.format != "squad",
                        keys) as writer,
          _opened(job.skipped, None) as side):
        window: list[Row] = []
        for row in read_inputs(job.source, stream, Policy(job.on_error, labels=False, hint=SKIP_HINT)):
            if row.error is not None:  # on_error "skip": the reader handed the row on to be recorded
                skipped += _skipped(row, side)
                continue
            window.append(row)
            if len(window) >= job.window:
                done, skipped = _counts(_flush(predictor, window, writer, progress, side), done, skipped)
        done, skipped = _counts(_flush(predictor, window, writer, progress, side), done, skipped)
    output = "<stdout>" if job.to_stdout else str(job.output)
    return PredictSummary(done, skipped, time.perf_counter() - start, output,
                          str(job.skipped) if job.skipped is not None else None, columns_note(job.source))


def columns_note(source: Source) -> str | None:
    """Which columns of a CSV/TSV file the examples were read from (see
    :func:`~tinyplm.predict.table_inputs.columns_read`); None for other formats and for stdin,
    which cannot be read again."""
    if source.format not in ("csv", "tsv") or source.path == STDIN:
        return None
    with open_binary(source.path) as stream:
        return columns_read(source, decoded_lines(stream))


@contextlib.contextmanager
def _opened(path: str | Path | None, stream: TextIO | None) -> Iterator[TextIO | None]:
    """An atomic output file for ``path``, or ``stream`` when ``path`` is None."""
    if path is None:
        yield stream
        return
    with output_file(path) as fh:
        yield fh


def _skipped(row: Row, side: TextIO | None) -> int:
    """List a skipped ``row`` in the side file -> 1."""
    if side is None:  # check_job asks for a side file with --on-error skip
        raise DataError(row.error + SKIP_HINT)
    side.write(json.dumps({"line": row.line, "where": row.where, "error": row.error}, ensure_ascii=False) + "\n")
    return 1


def _counts(flushed: tuple[int, int], done: int, skipped: int) -> tuple[int, int]:
    """(rows written, rows skipped) so far, with one :func:`_flush`'s added."""
    return done + flushed[0], skipped + flushed[1]


def _flush(predictor: Predictor, window: list[Row], writer: Writer, progress: Callable[[int], None] | None,
           side: TextIO | None) -> tuple[int, int]:
    """Predict and write ``window`` in input order, then empty it -> (rows written, rows skipped).
    Rows whose outputs are NaN (:mod:`tinyplm.models.finite`) are handled as bad rows are
    (:func:`_nan_rows`)."""
    if not window:
        return 0, 0
    try:
        predicted, skipped = list(zip(window, predictor.predict([r.item for r in window]), strict=True)), 0
    except NanOutputs as exc:
        predicted, skipped = _nan_rows(predictor, window, exc, side)
    for row, pred in predicted:
        writer.write(row, pred)
    count = len(window) - skipped
    window.clear()
    if progress is not None:
        progress(count)
    return count, skipped


def _nan_rows(predictor: Predictor, window: list[Row], exc: NanOutputs, side: TextIO | None) -> tuple[list, int]:
    """Rows of ``window`` whose outputs are NaN stop the run (``DataError`` naming their lines) or, with
    ``--on-error skip`` (a side file), are listed there and the others predicted -> ((row,
    prediction) of those, rows skipped)."""
    bad = set(exc.rows)
    where = ", ".join(window[i].where for i in sorted(bad)[:5]) + (", ..." if len(bad) > 5 else "")
    error = "the model's outputs for this row are NaN, so no class or answer can be read from them"
    if side is None:
        raise DataError(f"{where}: {error} ({len(bad)} of the {len(window)} rows read together; a compressed "
                        "form or bf16 overflowing on them does this: predict with the model's float form)"
                        + SKIP_HINT) from None
    for i in sorted(bad):
        _skipped(Row(window[i].line, window[i].where, error=error), side)
    kept = [row for i, row in enumerate(window) if i not in bad]
    predictions = predictor.predict([r.item for r in kept]) if kept else []
    return list(zip(kept, predictions, strict=True)), len(bad)
