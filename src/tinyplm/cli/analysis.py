"""Subcommands that look inside models: probe (linear probes per layer) and heads (attention heads)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tinyplm.cli.app import DataRoot, app, out
from tinyplm.errors import TinyplmError

Target = Annotated[str, typer.Argument(help="a run dir (every float PyTorch stage), a model dir or an alias")]
Task = Annotated[str, typer.Option("--task", help="conll2003-pos, conll2003-chunk, conll2003-ner or sst2")]
Stages = Annotated[str | None, typer.Option("--stages", help="run dir: only these stages, comma-separated")]
Out = Annotated[Path | None, typer.Option(
    "--out", help="model dir: where analysis/ and analysis.html go (default runs/analysis/NAME)")]
Seed = Annotated[int, typer.Option(help="sampling (and random-encoder) seed")]


def _say(text: str) -> None:
    out.print(f"[dim]{text}[/dim]", highlight=False)


def _stages(text: str | None) -> list[str] | None:
    return [s.strip() for s in text.split(",") if s.strip()] if text else None


def _heads(text: str | None) -> tuple[tuple[int, int], ...]:
    """``"1:3,2:0"`` (layer from 1, head from 0) -> ((0, 3), (1, 0))."""
    if not text:
        return ()
    try:
        pairs = [tuple(int(x) for x in item.split(":")) for item in text.split(",") if item.strip()]
    except ValueError:
        pairs = [()]
    if any(len(p) != 2 or p[0] < 1 or p[1] < 0 for p in pairs):
        raise TinyplmError(f"--show: expected LAYER:HEAD pairs like 1:3,2:0 (layers from 1, heads from 0), "
                           f"got '{text}'")
    return tuple((layer - 1, head) for layer, head in pairs)


@app.command("probe")
def probe_cmd(
    target: Target,
    task: Task,
    stages: Stages = None,
    out_dir: Out = None,
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

    try:
        settings = ProbeSettings(train_sentences, dev_sentences, max_length, pool=pool, seed=seed, control=control)
    except ValueError as exc:
        raise TinyplmError(str(exc)) from None
    found = resolve_target(target, out_dir, _stages(stages))
    for name, why in found.skipped:
        _say(f"skipped {name}: {why}")
    if not found.models:
        raise TinyplmError(f"{target}: no float PyTorch model to probe")
    report, page = probe_target(found, probe_task(task), settings, data_dir, say=_say)
    for c in report.curves:
        best = c.best_layer
        ctl = f", random encoder {c.control[best]:.4f}" if c.control is not None else ""
        layers = " ".join(f"{a:.3f}" for a in c.accuracy)
        out.print(f"{c.name}: best layer {best} accuracy {c.accuracy[best]:.4f}{ctl}, majority {c.majority:.4f}; "
                  f"per layer (emb first): {layers}", highlight=False)
    out.print(f"report: {page}", highlight=False)


@app.command("heads")
def heads_cmd(
    target: Target,
    task: Task,
    stages: Stages = None,
    out_dir: Out = None,
    data_dir: DataRoot = None,
    sentences: Annotated[int, typer.Option(help="dev sentences analysed")] = 200,
    max_length: Annotated[int, typer.Option(help="word pieces per sentence")] = 64,
    example: Annotated[int | None, typer.Option(help="the sentence (index into those analysed) drawn")] = None,
    show: Annotated[str | None, typer.Option(
        help="heads drawn on it, LAYER:HEAD pairs like 1:3,2:0 (default: the most typical of each kind)")] = None,
    seed: Seed = 0,
) -> None:
    """Statistics of every attention head over dev sentences (entropy, attention to [CLS], [SEP],
    punctuation, previous/next and rarest token, confidence, Taylor importance), heatmaps and
    attention maps; names the heads meeting Voita et al.'s positional rule.

    Example: tinyplm heads minilm-l6 --task sst2
    Example: tinyplm heads runs/sst2_demo --task sst2 --show 1:3,2:0
    """
    from tinyplm.evaluate.head_run import HeadSettings
    from tinyplm.evaluate.probe_data import probe_task
    from tinyplm.run.analysis import heads_target, resolve_target

    if sentences < 1 or max_length < 4:
        raise TinyplmError("--sentences must be >= 1 and --max-length >= 4")
    settings = HeadSettings(sentences=sentences, max_length=max_length, example=example, show=_heads(show), seed=seed)
    found = resolve_target(target, out_dir, _stages(stages))
    for name, why in found.skipped:
        _say(f"skipped {name}: {why}")
    if not found.models:
        raise TinyplmError(f"{target}: no float PyTorch model to analyse")
    try:
        report, page = heads_target(found, probe_task(task), settings, data_dir, say=_say)
    except ValueError as exc:
        raise TinyplmError(str(exc)) from None
    for stage in report.stages:
        positional = [f"{stage.head_name(p.layer, p.head)} {p.kind} {p.share:.0%}"
                      for p in stage.patterns(report.threshold, ("prev", "next"))]
        out.print(f"{stage.name}: positional heads (>= {report.threshold:.0%} rule): "
                  f"{', '.join(positional) or 'none'}", highlight=False)
        if stage.importance_note:
            _say(f"{stage.name}: no importance: {stage.importance_note}")
    out.print(f"report: {page}", highlight=False)
