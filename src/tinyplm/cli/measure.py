"""Subcommands that look at models and runs: evaluate, evaluate-squad, bench, report, tasks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tinyplm.cli.app import EvalPrecision, app, exact_precision, out, print_stages
from tinyplm.errors import TinyplmError
from tinyplm.files import write_json_atomic
from tinyplm.tasks.heads import Head


@app.command("evaluate")
def evaluate_cmd(
    model_dir: Annotated[Path, typer.Argument(help="a saved model dir (HF format)")],
    task: Annotated[str, typer.Option("--task", help="task name, e.g. sst2")],
    data_dir: Annotated[str | None, typer.Option(
        "--data-dir", help="data root: a GLUE folder, or the folder holding squad/ and conll2003/")] = None,
    max_length: Annotated[int | None, typer.Option(
        help="max tokens per example (SQuAD: per window); default: what the model was trained with, from its "
             "config or run; else 128")] = None,
    doc_stride: Annotated[int | None, typer.Option(
        help="SQuAD: tokens shared by consecutive windows (default: 128, or half a window's context room)")] = None,
    max_query_length: Annotated[int, typer.Option(help="SQuAD: question tokens kept")] = 64,
    predictions: Annotated[Path | None, typer.Option(
        "--predictions", help="SQuAD tasks: also write the dev answers here (JSON: id -> text)")] = None,
    context_sentences: Annotated[int | None, typer.Option(
        help="goodreads_spoilers_reviews, tvtropes_spoilers: preceding sentences (of the review; of the file) "
             "given with each sentence (default: what the model was trained with, from its config or run; "
             "else 0)")] = None,
    context_after: Annotated[int | None, typer.Option(
        help="goodreads_spoilers_reviews, tvtropes_spoilers: following sentences also given with each sentence "
             "(default: what the model was trained with; else 0)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    precision: EvalPrecision = "fp32",
) -> None:
    """Official task metrics of a saved model on the task's dev split(s), in fp32 (or --precision).

    Example: tinyplm evaluate runs/sst2_demo/model --task sst2
    Example: tinyplm evaluate runs/squad_v1_demo/model --task squad --max-length 256 --predictions preds.json
    """
    from tinyplm.config import validate_recipe
    from tinyplm.evaluate.model_eval import encode_evals, evaluate_model, span_prediction_texts
    from tinyplm.models import load_classifier
    from tinyplm.models.infer import predict_logits
    from tinyplm.run import load_task
    from tinyplm.tasks.spoilers import CONTEXT_TASKS

    bf16 = exact_precision(precision) == "bf16"
    max_length, context_sentences, context_after = _as_trained(model_dir, task, max_length, context_sentences,
                                                               context_after)
    spec = validate_recipe({"task": {"name": task, "data_dir": data_dir, "max_length": max_length,
                                     "doc_stride": doc_stride, "max_query_length": max_query_length,
                                     "context_sentences": context_sentences, "context_after": context_after}},
                           source="command line").task
    data = load_task(spec)
    if predictions is not None and data.head != Head.SPAN:
        raise TinyplmError(f"--predictions writes SQuAD answers; task {data.task} has a {data.head} head")
    model, tok = load_classifier(model_dir, data.labels, data.is_regression, data.head)
    evals = encode_evals(data, tok, max_length)
    metrics = evaluate_model(model, data, evals, bf16=bf16)
    if predictions is not None:
        texts = span_prediction_texts(data.evals["dev"], evals["dev"], predict_logits(model, evals["dev"], bf16=bf16))
        write_json_atomic(predictions, texts, indent=1)
        out.print(f"[dim]{len(texts)} answers written to {predictions}[/dim]", highlight=False)
    context = ({"context_sentences": spec.context_sentences, "context_after": spec.context_after}
               if data.task in CONTEXT_TASKS else {})
    _print_evaluation(model, model_dir, data, metrics, context, precision, as_json)


def _print_evaluation(model, model_dir: Path, data, metrics: dict, context: dict, precision: str,
                      as_json: bool) -> None:
    """``evaluate``'s answer: the metrics, the precision they were computed in (a model of another
    runtime or quantized: as it runs) and the label names they refer to; JSON or one line each."""
    from tinyplm.evaluate.runtime import describe

    ran = describe(model)
    measured_in = precision if ran.runtime == "torch" and ran.precision == "fp32" else ran.precision
    labels = {"labels": list(data.labels)} if data.labels and not data.is_regression else {}
    if as_json:
        out.print_json(json.dumps({"task": data.task, "model": str(model_dir), **context, "metrics": metrics,
                                   "precision": measured_in, **labels}))
        return
    shown = {**context, **metrics, "precision": measured_in, **{k: ", ".join(v) for k, v in labels.items()}}
    for k, v in shown.items():
        out.print(f"{k}: {v:.4f}" if isinstance(v, float) else f"{k}: {v}")


def _as_trained(model_dir: Path, task: str, max_length: int | None, context: int | None,
                after: int | None) -> tuple[int, int, int]:
    """``(max length, context sentences before, after)`` to read ``task`` with for ``model_dir``:
    the given ones, else those the model was trained with (its run's recipe or its config's stamp;
    128, 0 and 0 when nothing records them). Context applies to the tasks that take it only."""
    from tinyplm.inference.model_info import DEFAULT_MAX_LENGTH, trained_task
    from tinyplm.tasks import canonical
    from tinyplm.tasks.spoilers import CONTEXT_TASKS

    takes_context = canonical(task) in CONTEXT_TASKS
    wants_context = takes_context and (context is None or after is None)
    run = trained_task(model_dir) if max_length is None or wants_context else None
    if max_length is None:
        max_length = run.max_length if run is not None and run.max_length else DEFAULT_MAX_LENGTH
    if takes_context and context is None:
        context = run.context_sentences if run is not None else 0
    if takes_context and after is None:
        after = run.context_after if run is not None else 0
    return max_length, context or 0, after or 0


@app.command("evaluate-squad")
def evaluate_squad_cmd(
    predictions: Annotated[Path, typer.Argument(help="JSON object: question id -> answer text")],
    data_file: Annotated[Path, typer.Argument(help="official SQuAD v1.1 or v2.0 JSON")],
) -> None:
    """Exact match and F1 of a predictions file, with the official v1.1 / v2.0 semantics
    (v2.0, detected from the file: also HasAns/NoAns). Prints JSON.

    Example: tinyplm evaluate-squad runs/squad/predictions.json ../shared/data/squad/dev-v1.1.json
    """
    from tinyplm.errors import DataError
    from tinyplm.evaluate.squad import questions, squad_scores
    from tinyplm.tasks.squad import read_squad

    data = read_squad(data_file)
    try:
        preds = json.loads(predictions.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{predictions}: predictions file not found") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{predictions}: not a JSON file ({exc})") from None
    if not isinstance(preds, dict) or not all(isinstance(v, str) for v in preds.values()):
        raise DataError(f"{predictions}: expected a JSON object mapping question ids to answer strings")
    gold = questions(data.examples)
    unknown = set(preds) - {q.id for q in gold}
    scores = squad_scores(gold, preds, v2=data.v2)
    scores["unknown_ids"] = len(unknown)
    out.print_json(json.dumps(scores))

@app.command("bench")
def bench_cmd(
    model_dirs: Annotated[list[Path], typer.Argument(help="teacher dir first, then the students")],
    task: Annotated[str, typer.Option("--task", help="task whose dev sentences are used")],
    out_dir: Annotated[Path | None, typer.Option("--out", "-o", help="write results.json + reports here")] = None,
    data_dir: Annotated[str | None, typer.Option("--data-dir", help="GLUE folder")] = None,
    max_length: Annotated[int | None, typer.Option(
        help="max tokens per example; default: what the first model was trained with (its config or run), "
             "else 128")] = None,
    context_sentences: Annotated[int | None, typer.Option(
        help="goodreads_spoilers_reviews, tvtropes_spoilers: preceding sentences given with each sentence "
             "(default: what the first model was trained with; else 0)")] = None,
    context_after: Annotated[int | None, typer.Option(
        help="goodreads_spoilers_reviews, tvtropes_spoilers: following sentences also given with each sentence "
             "(default: what the first model was trained with; else 0)")] = None,
    rounds: Annotated[int, typer.Option(help="interleaved timing rounds")] = 3,
    runtimes: Annotated[str | None, typer.Option(
        "--runtimes", help="also run each PyTorch model in these runtimes, e.g. torch,onnxruntime,openvino")] = None,
    tolerance: Annotated[float, typer.Option(help="--runtimes: accuracy a runtime may lose and still win")] = 0.005,
    precision: EvalPrecision = "fp32",
) -> None:
    """Measure models side by side: metrics, size, batch-1 latency, batch throughput; with
    --runtimes, each model in each runtime, and which runtime is fastest within --tolerance.

    Example: tinyplm bench runs/sst2_demo/teacher runs/sst2_demo/model --task sst2 --out runs/bench
    Example: tinyplm bench runs/sst2_demo/teacher --task sst2 --runtimes torch,onnxruntime,openvino --out runs/rt
    """
    if out_dir and (out_dir / "results.json").exists():
        raise TinyplmError(f"{out_dir}: already holds results.json; choose another --out")
    import tempfile

    from tinyplm.config import TaskSpec
    from tinyplm.run import bench

    wanted = [r.strip() for r in runtimes.split(",") if r.strip()] if runtimes else None
    exact_precision(precision)
    max_length, context_sentences, context_after = _as_trained(model_dirs[0], task, max_length, context_sentences,
                                                               context_after)
    spec = TaskSpec(name=task, data_dir=data_dir, max_length=max_length, context_sentences=context_sentences,
                    context_after=context_after)
    with tempfile.TemporaryDirectory(prefix="tinyplm-bench-") as scratch:
        record = bench(model_dirs, spec, rounds, runtimes=wanted, work=out_dir or Path(scratch), tolerance=tolerance,
                       precision=precision)
        print_stages(record)
        for model, best in (record.info.fastest or {}).items():
            out.print(f"{model}: fastest within {tolerance} {record.metric}: {best.fastest} ({best.runtime})",
                      highlight=False)
    if out_dir:
        from tinyplm.report import write_all

        out_dir.mkdir(parents=True, exist_ok=True)
        write_all(record, out_dir)
        out.print(f"report: {out_dir / 'report.html'}")

@app.command("report")
def report_cmd(run_dir: Annotated[Path, typer.Argument(help="a finished run dir (holds results.json)")]) -> None:
    """Rebuild summary.md, report.html, plots and model cards from results.json.

    Example: tinyplm report runs/sst2_demo
    """
    from tinyplm.report import rebuild

    written = rebuild(run_dir)
    out.print(f"report: {written.get('report.html', run_dir / 'report.html')}")

@app.command("tasks")
def tasks_cmd(data_dir: Annotated[str | None, typer.Option(
        "--data-dir", help="data root: a GLUE folder, or the folder holding squad/ and conll2003/")] = None) -> None:
    """List the tasks, their metrics and whether their data files are present.

    Example: tinyplm tasks --data-dir ../shared/data/glue
    """
    from tinyplm import tasks

    table = Table(title="tasks")
    for col in ("task", "metrics", "labels", "files present"):
        table.add_column(col)
    for name in tasks.names():
        t = tasks.get(name, data_dir)
        present = t.data_present()
        shown = ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in present.items())
        labels = "answer span in the context" if t.head == Head.SPAN else ", ".join(t.labels) or "regression"
        table.add_row(name, ", ".join(t.metrics), labels, shown)
    out.print(table)
