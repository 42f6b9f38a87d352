"""``tinyplm probe``: a linear probe per layer of a frozen model (its report: run/analysis.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from tinyplm.cli.app import AnalysisOut, AnalysisTarget, AnalysisTask, DataRoot, Seed, Stages, app, names, note, out
from tinyplm.errors import TinyplmError


@app.command("probe")
def probe_cmd(
    target: AnalysisTarget,
    task: AnalysisTask,
    stages: Stages = None,
    out_dir: AnalysisOut = None,
    data_dir: DataRoot = None,
    train_sentences: Annotated[int, typer.Option(help="training sentences sampled for the probe")] = 2000,
    dev_sentences: Annotated[int, typer.Option(help="dev sentences sampled to score it")] = 500,
    max_length: Annotated[int, typer.Option(help="word pieces per sentence")] = 128,
    pool: Annotated[str, typer.Option(help="sentence tasks: mean (of real tokens) or cls")] = "mean",
    control: Annotated[bool, typer.Option("--control/--no-control", help="also probe a random encoder")] = True,
    seed: Seed = 0,
) -> None:
    """A linear probe per layer of a frozen model (embeddings, then each layer), against the majority
    class and a random encoder of the same shape; the curves go into the run's report.

    Example: tinyplm probe minilm-l6 --task conll2003-pos
    Example: tinyplm probe runs/sst2_demo --task conll2003-pos --train-sentences 1000
    """
    from tinyplm.evaluate.probe import ProbeSettings
    from tinyplm.evaluate.probe_data import probe_task
    from tinyplm.run.analysis import probe_target, resolve_target

    for flag, value, least in (("--train-sentences", train_sentences, 1), ("--dev-sentences", dev_sentences, 1),
                               ("--max-length", max_length, 4)):
        if value < least:  # an IndexError or a ValueError naming no option before
            raise TinyplmError(f"{flag}: expected at least {least}, got {value}")
    try:
        settings = ProbeSettings(train_sentences, dev_sentences, max_length, pool=pool, seed=seed, control=control)
    except ValueError as exc:
        raise TinyplmError(str(exc)) from None
    found = resolve_target(target, out_dir, names(stages))
    for name, why in found.skipped:
        note(f"skipped {name}: {why}")
    if not found.models:
        raise TinyplmError(f"{target}: no float PyTorch model to probe")
    report, page = probe_target(found, probe_task(task), settings, data_dir, say=note)
    for c in report.curves:
        best = c.best_layer
        ctl = f", random encoder {c.control[best]:.4f}" if c.control is not None else ""
        layers = " ".join(f"{a:.3f}" for a in c.accuracy)
        out.print(f"{c.name}: best layer {best} accuracy {c.accuracy[best]:.4f}{ctl}, majority {c.majority:.4f}; "
                  f"per layer (emb first): {layers}", highlight=False)
    out.print(f"report: {page}", highlight=False)
