"""Subcommands that use a model: predict (files in, predictions out) and serve (HTTP)."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from tinyplm.cli.app import app, err, out

ModelDir = Annotated[Path, typer.Argument(help="a saved model dir, or a run dir (its model/ is used)")]
MaxLength = Annotated[int | None, typer.Option(
    help="max tokens per example (SQuAD: per window); default: the run's task.max_length, else 128")]
DocStride = Annotated[int | None, typer.Option(help="SQuAD: tokens shared by consecutive windows (default: the "
                                                    "run's, else 128 or half a window's context room)")]
MaxQueryLength = Annotated[int | None, typer.Option(help="SQuAD: question tokens kept (default: the run's, else 64)")]
NullThreshold = Annotated[float | None, typer.Option(
    help="SQuAD v2.0: answer empty when the no-answer score beats the best span by more (default: 0 for a "
         "squad_v2 run, else always answer)")]
Threads = Annotated[int | None, typer.Option(help="torch threads (default: all cores)")]
Host = Annotated[str, typer.Option(help="address to listen on (loopback by default: only this machine)")]
Streams = Annotated[int, typer.Option(help="batches an OpenVINO model runs at once, each on its share of the cores "
                                       "(PyTorch models: 1)")]
InputFormat = Annotated[str | None, typer.Option(
    help="text, csv, tsv, jsonl, squad, conll or reviews (Goodreads JSON lines, one prediction per sentence; "
         "the default for .json/.jsonl given to a goodreads_spoilers_reviews model) (default: from the input's "
         "suffix; .txt: text)")]
Header = Annotated[bool | None, typer.Option(
    "--header/--no-header",
    help="CSV/TSV: whether the first line names the columns; without one, --text-column takes a column number "
         "from 1 (default: a header, except a file in the layout of the run's header-less task: CoLA, TV Tropes)")]


def _settings(max_length, doc_stride, max_query_length, null_threshold) -> dict:
    return {"max_length": max_length, "doc_stride": doc_stride, "max_query_length": max_query_length,
            "null_threshold": null_threshold}


def _threads(threads: int | None) -> None:
    if threads is not None:
        import torch

        from tinyplm.errors import TinyplmError

        if threads < 1:
            raise TinyplmError(f"--threads: expected at least 1, got {threads}")
        torch.set_num_threads(threads)


UseRay = Annotated[bool, typer.Option(
    "--ray", help="--input is a folder or glob of shards, --output a folder: one output shard per input shard, "
    "predicted by a pool of Ray actors (Ray Data); pip install 'tinyplm[cluster]'")]
Workers = Annotated[int, typer.Option(help="--ray: actors, each loading the model once")]
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
    workers: Workers = 2,
    address: RayAddress = None,
) -> None:
    """Predict every example of a file with a saved model (any head): one record per input, in
    input order, written atomically (the output appears only when every row is done).

    Example: tinyplm predict runs/sst2_demo --input reviews.txt --output predictions.jsonl
    Example: tinyplm predict runs/sst2_demo/model -i ../shared/data/glue/SST-2/dev.tsv -o dev.csv
    Example: tinyplm predict runs/squad_v1_demo -i questions.jsonl --on-error skip -o answers.jsonl
    Example: tinyplm predict runs/tvtropes_family/students/bilstm-kd-s1 -i sentences.csv --no-header --text-column 2
    Example: tinyplm predict runs/sst2_demo/model -i 'reviews/part-*.tsv' -o predictions/ --ray --workers 2
    """
    from tinyplm.errors import TinyplmError
    from tinyplm.predict.shards import ShardOptions

    if batch_size < 1:
        raise TinyplmError(f"--batch-size: expected at least 1, got {batch_size}")
    _threads(threads)
    options = ShardOptions(fmt, input_format, text_column, pair_column, header, on_error, window, batch_size,
                           _settings(max_length, doc_stride, max_query_length, null_threshold))
    if ray:
        return _predict_ray(model_dir, input_file, output, options, workers, threads, address)
    _predict_plain(model_dir, input_file, output, options, skipped)


def _predict_plain(model_dir: Path, input_file: str, output: str | None, o, skipped: Path | None) -> None:
    """``predict`` in this process: one input file (or stdin) into one output file (or stdout)."""
    from tinyplm.inference.predictor import Predictor
    from tinyplm.predict.predict import PredictJob, check_job, predict_file, source_for
    from tinyplm.predict.writers import output_format

    if skipped is None and o.on_error == "skip" and output not in (None, "-"):
        skipped = Path(f"{output}.skipped.jsonl")
    predictor = Predictor.load(model_dir, batch_size=o.batch_size, **o.settings)
    info = predictor.info
    source = source_for(info, input_file, o.input_format, o.text_column, o.pair_column, o.header)
    job = PredictJob(source, output, output_format(output, o.fmt), o.on_error, skipped, o.window)
    check_job(job)
    with _progress() as advance:
        summary = predict_file(predictor, job, advance)
    line = (f"{summary.predicted} predictions -> {summary.output} ({summary.seconds:.1f} s, "
            f"{summary.per_second:.0f} examples/s); {info.head} head, max length {info.max_length} "
            f"({info.max_length_from})")
    if summary.skipped_file is not None:
        line += f"; {summary.skipped} rows skipped, listed in {summary.skipped_file}"
    err.print(line, markup=False, highlight=False, soft_wrap=True)


def _predict_ray(model_dir: Path, inputs: str, output: str | None, options, workers: int, threads: int | None,
                 address: str | None) -> None:
    """``predict --ray``: every shard of ``inputs`` into the folder ``output`` (see predict/shards.py)."""
    from dataclasses import replace

    from tinyplm.errors import TinyplmError
    from tinyplm.predict.shards import MANIFEST, ShardJob, list_shards, run_shards

    if output in (None, "-"):
        raise TinyplmError("--ray writes one output shard per input shard: name the output folder with --output")
    if options.fmt not in (None, "jsonl", "csv", "tsv"):
        raise TinyplmError(f"--format: expected jsonl, csv or tsv, got {options.fmt!r}")
    options = replace(options, fmt=options.fmt or "jsonl")
    job = ShardJob(Path(model_dir), list_shards(inputs), Path(output), options, workers, float(threads or 1), address)
    done, timing = run_shards(job)
    predicted, seconds = sum(d.predicted for d in done), timing["predict_s"]
    line = (f"{predicted} predictions in {len(done)} shards -> {output} ({seconds:.1f} s in the pool, "
            f"{predicted / seconds if seconds else 0:.0f} examples/s; Ray up in {timing['start_s']:.1f} s; "
            f"{workers} workers)")
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


@app.command("serve")
def serve_cmd(
    model_dir: ModelDir,
    host: Host = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port (0: any free port, printed)")] = 8000,
    max_batch: Annotated[int, typer.Option(help="most examples in one forward pass (1: no batching)")] = 32,
    max_wait_ms: Annotated[float, typer.Option(help="how long the oldest request waits for others to join")] = 5.0,
    max_queue: Annotated[int, typer.Option(help="examples that may wait; beyond, 503 with Retry-After")] = 256,
    timeout: Annotated[float, typer.Option(help="seconds a request may take before a 504")] = 10.0,
    max_body_bytes: Annotated[int, typer.Option(help="largest request body (413 beyond)")] = 1_000_000,
    max_texts: Annotated[int, typer.Option(help="most examples in one request")] = 64,
    max_chars: Annotated[int, typer.Option(help="most characters in one text")] = 10_000,
    max_length: MaxLength = None,
    doc_stride: DocStride = None,
    max_query_length: MaxQueryLength = None,
    null_threshold: NullThreshold = None,
    threads: Threads = None,
    streams: Streams = 1,
    api_key: Annotated[str | None, typer.Option(
        envvar="TINYPLM_API_KEY", show_envvar=True,
        help="require 'Authorization: Bearer KEY' on every endpoint but /health, /metrics and the docs (401 "
             "otherwise); prefer --api-key-file or the environment variable: a command line shows in ps")] = None,
    api_key_file: Annotated[Path | None, typer.Option(help="read the API key from this file (its one line)")]
    = None,
    protect_metrics: Annotated[bool, typer.Option(help="require the API key on /metrics too")] = False,
) -> None:
    """Serve a saved model over HTTP: POST /predict (dynamic batching), GET /health, /ready,
    /metrics (Prometheus), docs at /docs. SIGTERM or Ctrl-C: finish what was accepted, exit 0.

    Example: tinyplm serve runs/sst2_demo --port 8000
    Example: curl -s localhost:8000/predict -H 'content-type: application/json' -d '{"text": "a gripping film"}'
    Example: TINYPLM_API_KEY=$(cat key.txt) tinyplm serve runs/sst2_demo --host 0.0.0.0
    """
    from tinyplm.inference.predictor import Predictor
    from tinyplm.serve.api import Limits
    from tinyplm.serve.app import ServeSettings, create_app
    from tinyplm.serve.auth import is_loopback, resolve_api_key
    from tinyplm.serve.server import bind, run, stack

    key = resolve_api_key(api_key, api_key_file)
    settings = ServeSettings(max_batch, max_wait_ms, max_queue, timeout, Limits(max_body_bytes, max_texts, max_chars),
                             api_key=key, protect_metrics=protect_metrics, streams=streams)
    settings.check()
    _threads(threads)
    predictor = Predictor.load(model_dir, batch_size=max_batch, split_by_length=True,
                               **_settings(max_length, doc_stride, max_query_length, null_threshold))
    asgi, state = create_app(predictor, settings)
    sock = bind(host, port)
    address = f"http://{host if ':' not in host else f'[{host}]'}:{sock.getsockname()[1]}"
    say, info = partial(err.print, markup=False, highlight=False, soft_wrap=True), predictor.info
    say(f"serving {info.path} ({info.head} head, max length {info.max_length} from {info.max_length_from})")
    if key is None and not is_loopback(host):
        say(f"warning: serving on {host} without an API key: anyone who reaches this port can use the model; "
            "set --api-key-file or TINYPLM_API_KEY")
    guard = "no API key" if key is None else \
        f"API key required except on /health{'' if protect_metrics else ', /metrics'} and the docs"
    chosen = stack()
    run(asgi, sock, grace_s=timeout + 5, chosen=chosen,
        on_started=lambda: say(f"listening on {address} (docs: {address}/docs; {chosen}; {guard}); "
                               "SIGTERM or Ctrl-C stops"))
    err.print(f"stopped: {json.dumps(state.tally.as_dict())}", markup=False, highlight=False, soft_wrap=True)
