"""The Typer app, the consoles, options shared by several commands and the printing helpers.

Every command module (``cli/*.py``) adds its commands to :data:`app` at import time; the commands
only parse arguments, call one stage function and print. Bad input raises ``TinyplmError``;
:func:`main` prints its message (no traceback) and exits with 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from tinyplm.errors import TinyplmError

app = typer.Typer(
    name="tinyplm",
    help="Distil, compress and measure BERT-family models on a CPU.\n\n"
         "Example: tinyplm run recipes/glue/sst2_demo.yaml",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
# Not a terminal (logs, CI): a fixed width, so table columns are not squeezed to 80 characters.
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True)

Overrides = Annotated[list[str] | None, typer.Argument(
    help="recipe overrides key=value, e.g. teacher.finetune.lr=3e-5")]
Force = Annotated[bool, typer.Option("--force", help="replace a finished or unfinished run in the run dir")]
Resume = Annotated[bool, typer.Option("--resume", help="continue an interrupted run from its checkpoints")]
DataDir = Annotated[str | None, typer.Option(
    "--data-dir", help="GLUE folder (default TINYPLM_DATA or ../shared/data/glue)")]
DataRoot = Annotated[str | None, typer.Option(
    "--data-dir", help="data root: a GLUE folder, or the folder holding squad/ and conll2003/")]
EvalPrecision = Annotated[str, typer.Option(
    "--precision", help="fp32 | bf16: what the metrics are computed in (fp32: the same on every CPU)")]
#: ``--track`` on the commands that run a recipe: MLflow on at its default place (config/tracking.py).
Track = Annotated[bool, typer.Option(
    "--track", help="track the run in MLflow (recipe tracking.mlflow: true unless it names a URI; needs "
    "pip install 'tinyplm[track]')")]

# predict and serve: the model and how its inputs are cut.
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

# probe and heads: what is analysed, on which task, and where the pages go.
AnalysisTarget = Annotated[str, typer.Argument(
    help="a run dir (every float PyTorch stage), a model dir or an alias")]
AnalysisTask = Annotated[str, typer.Option("--task", help="conll2003-pos, conll2003-chunk, conll2003-ner or sst2")]
Stages = Annotated[str | None, typer.Option("--stages", help="run dir: only these stages, comma-separated")]
AnalysisOut = Annotated[Path | None, typer.Option(
    "--out", help="model dir: where analysis/ and analysis.html go (default runs/analysis/NAME)")]
Seed = Annotated[int, typer.Option(help="sampling (and random-encoder) seed")]


def exact_precision(value: str, flag: str = "--precision") -> str:
    """``value`` if it is ``fp32`` or ``bf16``; ``TinyplmError`` naming ``flag`` otherwise (a
    measurement never runs in ``auto``: its result would depend on the CPU)."""
    if value not in ("fp32", "bf16"):
        raise TinyplmError(f"{flag}: expected fp32 or bf16, got {value!r}")
    return value


def _fmt(value: float | None, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)


def print_stages(record) -> None:
    """The run's comparison table (one row per stage) on stdout."""
    from tinyplm.report.tables import stage_rows

    table = Table(title=f"{record.task}: {record.metric}")
    table.add_column("stage", no_wrap=True)
    table.add_column("runtime")
    for col in (record.metric, "retention %", "params (M)", "MB", "smaller", "p50 ms", "sent/s", "x teacher",
                "x best"):
        table.add_column(col, justify="right")
    for row in stage_rows(record):
        table.add_row(row.name, f"{row.runtime} {row.precision}", _fmt(row.metric, "{:.4f}"),
                      _fmt(row.retention, "{:.1f}"), _fmt(row.params_m, "{:.2f}"), _fmt(row.size_mb, "{:.1f}"),
                      _fmt(row.compression, "{:.1f}x"), _fmt(row.latency_p50_ms, "{:.2f}"),
                      _fmt(row.throughput, "{:.0f}"), _fmt(row.speedup, "{:.2f}x"),
                      _fmt(row.speedup_vs_best, "{:.2f}x"))
    out.print(table)
    final = record.info.final_model
    if final:
        out.print(f"final model: {final} ({record.info.final_rule or ''})", highlight=False)


def int_list(text: str, flag: str) -> list[int]:
    """``"1,3,5"`` -> ``[1, 3, 5]``; raises ``TinyplmError`` naming ``flag`` otherwise."""
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise TinyplmError(f"{flag}: expected comma-separated integers like 1,3,5, got '{text}'") from None


def names(text: str | None) -> list[str] | None:
    """``"a, b"`` -> ``["a", "b"]``; ``None`` or empty -> ``None``."""
    return [s.strip() for s in text.split(",") if s.strip()] if text else None


def note(text: str) -> None:
    """One dim line on stdout (what was skipped, what is being done)."""
    out.print(f"[dim]{text}[/dim]", highlight=False)


def model_settings(max_length, doc_stride, max_query_length, null_threshold) -> dict:
    """predict's and serve's input settings, as Predictor.load takes them."""
    return {"max_length": max_length, "doc_stride": doc_stride, "max_query_length": max_query_length,
            "null_threshold": null_threshold}


def set_threads(threads: int | None) -> None:
    """``--threads``: torch's thread count (unchanged when ``None``); below 1 is a ``TinyplmError``."""
    if threads is not None:
        import torch

        if threads < 1:
            raise TinyplmError(f"--threads: expected at least 1, got {threads}")
        torch.set_num_threads(threads)


class _Terminated(BaseException):
    """SIGTERM outside training (which checkpoints first and raises ``Interrupted``): stop as
    Ctrl-C stops, so atomic writes clean up and the user is told how to go on."""


def _terminate(signum, frame) -> None:
    raise _Terminated


def main() -> None:
    """Entry point: run the app; bad input -> one-line error on stderr and exit code 2;
    interrupted -> exit 130 (SIGINT) or 143 (SIGTERM), after training saved a checkpoint, and
    said (what was written is kept; a run continues with --resume)."""
    import signal

    from tinyplm.errors import Interrupted

    try:  # training and predict set their own while they run
        before = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread: signals stay as they are
        before = _terminate
    try:
        app()
    except TinyplmError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except Interrupted as exc:
        err.print(f"interrupted: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, _Terminated) as exc:
        name = "SIGTERM" if isinstance(exc, _Terminated) else "SIGINT"
        err.print(f"interrupted ({name}): what was written is kept (run, finetune, distill, pretrain and sweep "
                  "continue with --resume)", markup=False, highlight=False, soft_wrap=True)
        sys.exit(143 if name == "SIGTERM" else 130)
    finally:  # called in-process (a test, a notebook): the caller's handler again
        if before is not _terminate:
            signal.signal(signal.SIGTERM, before if before is not None else signal.SIG_DFL)
