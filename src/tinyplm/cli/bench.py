"""``tinyplm bench``: models measured side by side (metrics, size, latency, throughput), optionally in
several runtimes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tinyplm.cli.app import EvalPrecision, app, exact_precision, out, print_stages
from tinyplm.cli.evaluate import as_trained, custom_keys, note_other_task


@app.command("bench")
def bench_cmd(
    model_dirs: Annotated[list[Path], typer.Argument(help="teacher dir first, then the students")],
    task: Annotated[str, typer.Option("--task", help="task whose dev sentences are used (custom: as in the run)")],
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
    if out_dir:
        from tinyplm.run.measure import check_bench_out
        check_bench_out(out_dir, "--out")
    import tempfile

    from tinyplm.config import TaskSpec
    from tinyplm.run import bench

    wanted = [r.strip() for r in runtimes.split(",") if r.strip()] if runtimes else None
    exact_precision(precision)
    asked = max_length
    note_other_task(list(model_dirs), task)
    max_length, context_sentences, context_after = as_trained(model_dirs[0], task, max_length, context_sentences,
                                                               context_after, also=list(model_dirs[1:]))
    spec = TaskSpec(name=task, data_dir=data_dir, max_length=max_length, context_sentences=context_sentences,
                    context_after=context_after, **custom_keys(model_dirs[0], task))
    if task.strip().lower() == "embedding":  # its sets are read at eval_max_length: the models' own, as embed-eval
        from tinyplm.inference.model_info import embedding_window

        window = embedding_window(asked, list(model_dirs))
        spec = spec.model_copy(update={"eval_max_length": window}) if window is not None else spec
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
