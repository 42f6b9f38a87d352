"""``tinyplm evaluate`` (a saved model on a task's dev split) and ``tinyplm evaluate-squad`` (a SQuAD
predictions file); :func:`as_trained`, the settings a model is read with, which ``bench`` uses too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from tinyplm.cli.app import EvalPrecision, app, err, exact_precision, out
from tinyplm.errors import ModelError, TinyplmError
from tinyplm.files import write_json_atomic
from tinyplm.tasks.heads import Head


@app.command("evaluate")
def evaluate_cmd(
    model_dir: Annotated[Path, typer.Argument(help="a saved model dir (HF format)")],
    task: Annotated[str, typer.Option("--task", help="task name, e.g. sst2 (custom: as in the model's run)")],
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
    _check_window_flags(task, doc_stride, max_query_length)
    _check_predictions_path(predictions)
    note_other_task([model_dir], task)
    max_length, context_sentences, context_after = as_trained(model_dir, task, max_length, context_sentences,
                                                               context_after)
    spec = validate_recipe({"task": {"name": task, "data_dir": data_dir, "max_length": max_length,
                                     "doc_stride": doc_stride, "max_query_length": max_query_length,
                                     "context_sentences": context_sentences, "context_after": context_after,
                                     **custom_keys(model_dir, task)}}, source="command line").task
    data = load_task(spec, train=False)  # dev alone: a task's train file may be absent (QNLI's often is)
    _check_windows(model_dir, data, spec, predictions)
    model, tok = load_classifier(model_dir, data.labels, data.is_regression, data.head)
    _check_pairs(model_dir, model, tok, data)
    evals = encode_evals(data, tok, max_length)
    _note_cut(data, evals, tok, max_length)
    metrics = evaluate_model(model, data, evals, bf16=bf16)
    if predictions is not None:
        texts = span_prediction_texts(data.evals["dev"], evals["dev"], predict_logits(model, evals["dev"], bf16=bf16))
        write_json_atomic(predictions, texts, indent=1)
        out.print(f"[dim]{len(texts)} answers written to {predictions}[/dim]", highlight=False)
    context = ({"context_sentences": spec.context_sentences, "context_after": spec.context_after}
               if data.task in CONTEXT_TASKS else {})
    _print_evaluation(model, model_dir, data, metrics, context, precision, as_json)


def custom_keys(model_dir: Path, task: str) -> dict[str, object]:
    """For ``--task custom``: the files, columns and labels of the custom task ``model_dir``'s run was
    trained on (:func:`~tinyplm.inference.custom_run.custom_task_keys`); nothing for another task."""
    from tinyplm.config.task_section import spelled_as_compared
    from tinyplm.inference.custom_run import custom_task_keys
    from tinyplm.inference.pairs import CUSTOM_TASK

    return custom_task_keys(model_dir) if spelled_as_compared(task) == CUSTOM_TASK else {}


def _check_windows(model_dir: Path, data, spec, predictions: Path | None) -> None:
    """--predictions only for a SQuAD task; a SQuAD stride the model's tokenizer leaves no room for
    (:func:`~tinyplm.evaluate.model_eval.window_refusal`) refused before the model loads."""
    from tinyplm.evaluate.model_eval import window_refusal

    windows = Head(data.head).row.windows
    if predictions is not None and not windows:
        raise TinyplmError(f"--predictions writes SQuAD answers; task {data.task} has a {data.head} head")
    if windows and (problem := window_refusal(model_dir, spec)):
        raise TinyplmError(f"{model_dir}: {problem}; lower --doc-stride")


def _check_predictions_path(predictions: Path | None) -> None:
    """--predictions must name a file that can be written: checked before the model reads a window."""
    from tinyplm.predict.predict import writable

    if predictions is not None:
        writable(str(predictions), "--predictions", streams=False)  # written atomically: a file


def _check_pairs(model_dir: Path, model, tok, data) -> None:
    """Refuse a pair task on a model that cannot read pairs as its tokenizer encodes them
    (:func:`~tinyplm.models.token_ids.segment_problem`): it would fail on the first batch."""
    from tinyplm.models.token_ids import segment_problem

    dev = next(iter(data.evals.values()))
    if dev.examples and getattr(dev.examples[0], "text_pair", None) is not None:
        problem = segment_problem(model_dir, getattr(model.config, "to_dict", dict)(), tok)
        if problem:
            raise ModelError(f"{problem} (task '{data.task}' is a pair task)")


def _check_window_flags(task: str, doc_stride: int | None, max_query_length: int) -> None:
    """--doc-stride and --max-query-length read a SQuAD task's windows: on another task they are
    refused naming the flag (the recipe check would name task.KEY, which the user never wrote)."""
    from tinyplm.tasks import canonical

    given = [flag for flag, on in (("--doc-stride", doc_stride is not None), ("--max-query-length",
                                                                             max_query_length != 64)) if on]
    if given and canonical(task) not in ("squad", "squad_v2"):
        raise TinyplmError(f"{' and '.join(given)}: for SQuAD tasks (squad, squad_v2), whose contexts are read in "
                           f"windows; task {task} reads none")


def _note_cut(data, evals: dict, tok, max_length: int) -> None:
    """Say on stderr how many examples of each split ``max_length`` cuts (the metrics read only their
    first pieces; :func:`~tinyplm.run.cut_texts.cut_texts`)."""
    from tinyplm.run.cut_texts import cut_texts

    for split in cut_texts({k: (data.evals[k], e) for k, e in evals.items()}, tok, max_length):
        err.print(f"note: --max-length {max_length}: {split.sentence()}", highlight=False, markup=False)


def _print_evaluation(model, model_dir: Path, data, metrics: dict, context: dict, precision: str,
                      as_json: bool) -> None:
    """``evaluate``'s answer: the metrics (a metric the dev labels leave undefined, such as ROC AUC
    over one class, as ``undefined`` and why; JSON: null, with ``undefined`` saying why), the
    precision they were computed in (a model of another runtime or quantized: as it runs) and the
    label names they refer to; JSON or one line each."""
    from tinyplm.evaluate.runtime import describe
    from tinyplm.run.preflight_metrics import undefined_metrics

    ran = describe(model)
    measured_in = precision if ran.runtime == "torch" and ran.precision == "fp32" else ran.precision
    labels = {"labels": list(data.labels)} if data.labels and not data.is_regression else {}
    undefined = {k: why for k, why in undefined_metrics(data).items() if k in metrics}
    if as_json:
        out.print_json(json.dumps({"task": data.task, "model": str(model_dir), **context, "metrics": {
            k: None if k in undefined else v for k, v in metrics.items()}, "precision": measured_in, **labels,
            **({"undefined": undefined} if undefined else {})}))
        return
    metrics = {k: undefined.get(k, v) for k, v in metrics.items()}  # "undefined on the dev split: ..."
    shown = {**context, **metrics, "precision": measured_in, **{k: ", ".join(v) for k, v in labels.items()}}
    for k, v in shown.items():
        out.print(f"{k}: {v:.4f}" if isinstance(v, float) else f"{k}: {v}")


def note_other_task(model_dirs: list[Path], task: str) -> None:
    """Print :func:`~tinyplm.inference.model_info.other_task_note` of each of ``model_dirs`` on stderr."""
    from tinyplm.inference.model_info import other_task_note

    for model_dir in model_dirs:
        if note := other_task_note(model_dir, task):
            err.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)


def as_trained(model_dir: Path, task: str, max_length: int | None, context: int | None,
                after: int | None, also: list[Path] | None = None) -> tuple[int, int, int]:
    """``(max length, context sentences before, after)`` to read ``task`` with for ``model_dir``:
    the given ones, else those the model was trained with (its run's recipe or its config's stamp;
    128, 0 and 0 when nothing records them). Context applies to the tasks that take it only. The
    max length fits the positions of ``model_dir`` and of the models ``also`` read beside it: a
    longer one asked for is refused (``TinyplmError``), the trained or default one is cut."""
    from tinyplm.inference.model_info import fitting_max_length, trained_task
    from tinyplm.tasks import canonical
    from tinyplm.tasks.spoilers import CONTEXT_TASKS

    takes_context = canonical(task) in CONTEXT_TASKS
    wants_context = takes_context and (context is None or after is None)
    run = trained_task(model_dir) if max_length is None or wants_context else None
    max_length = fitting_max_length(max_length, run, list(also or ()) + [model_dir])  # within each one's positions
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
    from tinyplm.evaluate.squad import questions, read_predictions, squad_scores
    from tinyplm.tasks.squad import read_squad

    data = read_squad(data_file)
    gold = questions(data.examples)
    preds = read_predictions(predictions, (q.id for q in gold))
    unknown = set(preds) - {q.id for q in gold}
    scores = squad_scores(gold, preds, v2=data.v2)
    scores["unknown_ids"] = len(unknown)
    out.print_json(json.dumps(scores))
