"""``tinyplm heads``: statistics, heatmaps and attention maps of every attention head (its report:
run/analysis.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from tinyplm.cli.app import AnalysisOut, AnalysisTarget, AnalysisTask, DataRoot, Seed, Stages, app, names, note, out
from tinyplm.errors import TinyplmError


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


@app.command("heads")
def heads_cmd(
    target: AnalysisTarget,
    task: AnalysisTask,
    stages: Stages = None,
    out_dir: AnalysisOut = None,
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
    found = resolve_target(target, out_dir, names(stages))
    for name, why in found.skipped:
        note(f"skipped {name}: {why}")
    if not found.models:
        raise TinyplmError(f"{target}: no float PyTorch model to analyse")
    try:
        report, page = heads_target(found, probe_task(task), settings, data_dir, say=note)
    except ValueError as exc:
        raise TinyplmError(str(exc)) from None
    for stage in report.stages:
        positional = [f"{stage.head_name(p.layer, p.head)} {p.kind} {p.share:.0%}"
                      for p in stage.patterns(report.threshold, ("prev", "next"))]
        out.print(f"{stage.name}: positional heads (>= {report.threshold:.0%} rule): "
                  f"{', '.join(positional) or 'none'}", highlight=False)
        if stage.importance_note:
            note(f"{stage.name}: no importance: {stage.importance_note}")
    out.print(f"report: {page}", highlight=False)
