"""``tinyplm predict``: every example of a file (or of a folder of shards, with ``--ray``) predicted by
a saved model, written atomically."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from tinyplm.cli.app import (
    DocStride,
    MaxLength,
    MaxQueryLength,
    ModelDir,
    NullThreshold,
    Threads,
    app,
    err,
    model_settings,
    out,
    set_threads,
)

InputFormat = Annotated[str | None, typer.Option(
    help="text, csv, tsv, jsonl, squad, conll or reviews (Goodreads JSON lines, one prediction per sentence; "
         "the default for .json/.jsonl given to a goodreads_spoilers_reviews model) (default: from the input's "
         "suffix; .txt: text)")]
Header = Annotated[bool | None, typer.Option(
    "--header/--no-header",
    help="CSV/TSV: whether the first line names the columns; without one, --text-column takes a column number "
         "from 1 (default: a header, except a file in the layout of the run's header-less task: CoLA, TV Tropes)")]

UseRay = Annotated[bool, typer.Option(
    "--ray", help="--input is a folder or glob of shards, --output a folder: one output shard per input shard, "
    "predicted by a pool of Ray actors (Ray Data); pip install 'tinyplm[cluster]'")]
Workers = Annotated[int | None, typer.Option(
    help="--ray: actors, each loading the model once (default: one with every core on this machine, "
         "2 of one thread on a cluster)")]
RayAddress = Annotated[str | None, typer.Option(
    "--address", help="--ray: an existing Ray cluster (ray start --head prints it); default: Ray on this machine")]


@app.command("predict")
def predict_cmd(
    model_dir: ModelDir,
    input_file: Annotated[str, typer.Option("--input", "-i", help="input file, or - for stdin")],
    output: Annotated[str | None, typer.Option("--output", "-o", help="output file (default: stdout)")] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="jsonl, csv or tsv (default: from --output's "
                                                             "suffix, else jsonl)")] = None,
    input_format: InputFormat = None,
    text_column: Annotated[str | None, typer.Option(
        help="CSV/TSV/JSONL field of the text (SQuAD: the question; tagger: the words)")] = None,
    pair_column: Annotated[str | None, typer.Option(help="field of the second text (SQuAD: the context)")] = None,
    header: Header = None,
    on_error: Annotated[str, typer.Option(help="raise: stop at a bad row, naming it; skip: leave it out and "
                                               "list it in the --skipped file")] = "raise",
    skipped: Annotated[Path | None, typer.Option(help="--on-error skip: the side file listing skipped rows "
                                                      "(default: OUTPUT.skipped.jsonl)")] = None,
    max_length: MaxLength = None,
    doc_stride: DocStride = None,
    max_query_length: MaxQueryLength = None,
    null_threshold: NullThreshold = None,
    batch_size: Annotated[int, typer.Option(help="examples per forward pass")] = 64,
    window: Annotated[int, typer.Option(help="examples read, sorted by length and predicted at once")] = 1024,
    threads: Threads = None,
    ray: UseRay = False,
    workers: Workers = None,
    address: RayAddress = None,
) -> None:
    """Predict every example of a file with a saved model (any head): one record per input, in
    input order, written atomically (the output appears only when every row is done).

    Example: tinyplm predict runs/sst2_demo --input reviews.txt --output predictions.jsonl
    Example: tinyplm predict runs/sst2_demo/model -i ../shared/data/glue/SST-2/dev.tsv -o dev.csv
    Example: tinyplm predict runs/squad_v1_demo -i questions.jsonl --on-error skip -o answers.jsonl
    Example: tinyplm predict runs/tvtropes_family/students/bilstm-kd-s1 -i sentences.csv --no-header --text-column 2
    Example: tinyplm predict runs/sst2_demo/model -i 'reviews/part-*.tsv' -o predictions/ --ray --workers 2
    Example: tinyplm predict my-sentence-model/ -i sentences.txt -o vectors.npy
    """
    from tinyplm.errors import TinyplmError
    from tinyplm.predict.predict import check_options
    from tinyplm.predict.shards import ShardOptions

    if batch_size < 1:
        raise TinyplmError(f"--batch-size: expected at least 1, got {batch_size}")
    check_options(on_error, window)
    if ray and skipped is not None:
        raise TinyplmError("--skipped: with --ray each shard's skipped rows are listed beside its output shard "
                           "(NAME.skipped.jsonl); leave --skipped out")
    set_threads(threads)
    options = ShardOptions(fmt, input_format, text_column, pair_column, header, on_error, window, batch_size,
                           model_settings(max_length, doc_stride, max_query_length, null_threshold))
    if ray:
        return _predict_ray(model_dir, input_file, output, options, workers, threads, address)
    _predict_plain(model_dir, input_file, output, options, skipped)


@contextlib.contextmanager
def exits_on_sigterm() -> Iterator[None]:
    """``SIGTERM`` (``kill``, a scheduler's stop) raised as ``SystemExit(143)`` inside the block, so
    the atomic output's temporary file is removed as it is on Ctrl-C instead of left beside it."""
    def stop(signum, frame) -> None:
        raise SystemExit(128 + signum)

    try:
        before = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread (a test's worker): leave the default
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _predict_plain(model_dir: Path, input_file: str, output: str | None, o, skipped: Path | None) -> None:
    """``predict`` in this process: one input file (or stdin) into one output file (or stdout)."""
    from tinyplm.errors import TinyplmError
    from tinyplm.inference.model_info import model_info
    from tinyplm.inference.predictor import Predictor
    from tinyplm.predict.predict import PredictJob, check_job, predict_file, source_for
    from tinyplm.predict.writers import is_stream, output_format

    if skipped is None and o.on_error == "skip" and output not in (None, "-") and not is_stream(output):
        skipped = Path(f"{output}.skipped.jsonl")  # not beside /dev/stdout, a pipe: check_job asks for --skipped
    fmt = output_format(output, o.fmt)  # an output name of another format is refused before the model loads
    # the input, its columns and the output are checked on the model's config before the model loads
    info = model_info(model_dir, **o.settings)
    source = source_for(info, input_file, o.input_format, o.text_column, o.pair_column, o.header)
    job = PredictJob(source, output, fmt, o.on_error, skipped, o.window)
    check_job(job, info)
    predictor = Predictor.load(model_dir, batch_size=o.batch_size, **o.settings)
    info = predictor.info
    # pairs asked for are refused before a row is read (a task's own pair columns: at the first pair)
    if predictor.pair_problem and (source.pair_column or source.context_sentences or source.context_after):
        raise TinyplmError(predictor.pair_problem)
    with _progress() as advance, exits_on_sigterm():
        summary = predict_file(predictor, job, advance)
    line = (f"{summary.predicted} predictions -> {summary.output} ({summary.seconds:.1f} s, "
            f"{summary.per_second:.0f} examples/s); {info.head} head, max length {info.max_length or 'none'} "
            f"({info.max_length_from})")
    if summary.columns is not None:
        line += f"; text from {summary.columns} of {input_file}"
    if summary.skipped_file is not None:
        line += f"; {summary.skipped} rows skipped, listed in {summary.skipped_file}"
    if summary.predicted == 0 and not summary.skipped:  # said, so an empty output is not taken for a failure
        line += f"; {'the input' if input_file == '-' else input_file} holds no examples"
    err.print(line, markup=False, highlight=False, soft_wrap=True)


def _predict_ray(model_dir: Path, inputs: str, output: str | None, options, workers: int | None,
                 threads: int | None, address: str | None) -> None:
    """``predict --ray``: every shard of ``inputs`` into the folder ``output`` (see predict/shards.py)."""
    from dataclasses import replace

    from tinyplm.errors import TinyplmError
    from tinyplm.predict.shards import MANIFEST, ShardJob, list_shards, pool_shape, run_shards

    if output in (None, "-"):
        raise TinyplmError("--ray writes one output shard per input shard: name the output folder with --output")
    if options.fmt not in (None, "jsonl", "csv", "tsv"):
        raise TinyplmError(f"--format: expected jsonl, csv or tsv, got {options.fmt!r}")
    options = replace(options, fmt=options.fmt or "jsonl")
    workers, each = pool_shape(workers, threads, address)
    job = ShardJob(Path(model_dir), list_shards(inputs), Path(output), options, workers, each, address)
    done, timing = run_shards(job)
    predicted, seconds = sum(d.predicted for d in done), timing["predict_s"]
    pool = f"{workers} worker{'s' if workers > 1 else ''} of " + (f"{each:g} thread(s)" if each else "every CPU")
    line = (f"{predicted} predictions in {len(done)} shards -> {output} ({seconds:.1f} s in the pool, "
            f"{predicted / seconds if seconds else 0:.0f} examples/s; Ray up in {timing['start_s']:.1f} s; {pool})")
    skipped = sum(d.skipped for d in done)
    if skipped:
        line += f"; {skipped} rows skipped, listed beside their output shards"
    err.print(line, markup=False, highlight=False, soft_wrap=True)
    out.print(str(Path(output) / MANIFEST), highlight=False, soft_wrap=True)


class _progress:
    """A progress bar with examples/s on stderr when it is a terminal; nothing when piped."""

    def __enter__(self):
        if not err.is_terminal:
            return None
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self._bar = Progress(SpinnerColumn(), TextColumn("{task.completed} examples"),
                             TextColumn("{task.fields[rate]}"),
                             TimeElapsedColumn(), console=err, transient=True)
        self._bar.start()
        self._task = self._bar.add_task("predict", total=None, rate="")
        return self._advance

    def _advance(self, count: int) -> None:
        self._bar.advance(self._task, count)
        task = self._bar.tasks[0]
        rate = task.completed / task.elapsed if task.elapsed else 0.0
        self._bar.update(self._task, rate=f"{rate:.0f} examples/s")

    def __exit__(self, *exc) -> None:
        if getattr(self, "_bar", None) is not None:
            self._bar.stop()
