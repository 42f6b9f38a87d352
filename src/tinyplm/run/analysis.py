"""Looking inside the models of a run, or of one model dir: layer probes and head statistics.

``TARGET`` is a run dir (it holds results.json) or a model dir / alias:

- a run dir: every stage whose saved model is a float PyTorch model (or those named) is analysed;
  stages run elsewhere (ONNX, OpenVINO, quantized) are skipped, saying why. Results go to
  ``RUN_DIR/analysis/probe-<task>.json`` / ``heads-<task>.json``, merged by stage name with what
  is there (dropped, saying so, when it was made with other settings), written after each model,
  and the run's reports are rebuilt: report.html shows them. The run dir is locked meanwhile.
- a model dir: that model, written to ``OUT/analysis/`` and ``OUT/analysis.html``.

A pruned stage's heads carry their indices before pruning, composed along its ``parent`` chain
from the ``kept`` heads each ``prune_heads`` step recorded (and ``drop_layers`` steps), so the
report can mark the removed ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path

from tinyplm.compress.importance import importance
from tinyplm.errors import TinyplmError, did_you_mean
from tinyplm.evaluate.encoder import OpenedModel, not_analysable, open_model
from tinyplm.evaluate.head_run import HeadSettings, HeadsReport, analyse_heads
from tinyplm.evaluate.heads import piece_counts
from tinyplm.evaluate.probe import ProbeReport, ProbeSettings, probe_model
from tinyplm.evaluate.probe_data import Level, ProbeTask, encode_items, load_probe_data, read_split
from tinyplm.files import RunDirLock, check_creatable, write_json_atomic
from tinyplm.models import check_model_dir, resolve_model_dir
from tinyplm.models.classic.io import is_family_dir
from tinyplm.models.loading import ALIASES
from tinyplm.report import RESULTS, load_record, rebuild
from tinyplm.report.analysis import analysis_path, read_heads, read_probe, write_analysis_page
from tinyplm.report.records import RunRecord
from tinyplm.tasks import get as get_task
from tinyplm.tasks.encoding import encode_split

Say = Callable[[str], None]


@dataclass
class Target:
    """What to analyse: ``models`` (name, model dir), ``skipped`` (name, why), the folder holding
    ``analysis/`` and, for a run dir, its record."""

    base: Path
    models: list[tuple[str, Path]]
    skipped: list[tuple[str, str]] = field(default_factory=list)
    record: RunRecord | None = None


def resolve_target(target: str | Path, out: Path | None = None, stages: list[str] | None = None) -> Target:
    """A run dir (results.json inside) or a model dir / alias as a :class:`Target`.

    A model dir's results go to ``out`` (default ``runs/analysis/<name>``). Raises ``TinyplmError``
    for a stage name the run does not have, ``--stages`` on a model dir or ``--out`` on a run dir,
    ``RunDirError`` for an ``out`` that cannot be made (a file on its way), and ``ModelError`` for a
    missing or damaged model dir."""
    path = Path(target)
    if (path / RESULTS).is_file():
        if out is not None:
            raise TinyplmError(f"{path} is a run dir: its analysis goes to {path / 'analysis'}; drop --out")
        return _run_target(path, load_record(path / RESULTS), stages)
    if stages:
        raise TinyplmError(f"--stages picks stages of a run dir; {target} holds no {RESULTS}")
    model_dir = resolve_model_dir(str(target))
    name = str(target).lower() if str(target).lower() in ALIASES else model_dir.name
    if out is not None and (out / RESULTS).is_file():  # its analysis files hold the run's own stages
        raise TinyplmError(f"--out {out} is a run dir: a model's results would replace or sit beside its stages' "
                           f"(analysis/); analyse the run itself ({out}) or choose another --out")
    base = out or Path("runs") / "analysis" / name
    check_creatable(base, "analysis folder", flag="--out" if out else None)  # not after the model is analysed
    return Target(base=base, models=[(name, model_dir)])


def _run_target(run_dir: Path, record: RunRecord, stages: list[str] | None) -> Target:
    names = [s.name for s in record.stages]
    for name in stages or []:
        if name not in names:
            hint = did_you_mean(name, names) or "."
            raise TinyplmError(f"--stages: {run_dir} has no stage '{name}'{hint} Stages: {', '.join(names)}")
    found = Target(base=run_dir, models=[], record=record)
    for stage in record.stages:
        if stages and stage.name not in stages:
            continue
        model_dir = run_dir / stage.model_dir if stage.model_dir else None
        if model_dir is None or not model_dir.is_dir():
            found.skipped.append((stage.name, f"its model dir {model_dir or '(none recorded)'} is not there"))
            continue
        why = "a classic student: no transformer layers" if is_family_dir(model_dir) else \
            not_analysable(check_model_dir(model_dir))
        if why:
            found.skipped.append((stage.name, why))
        else:
            found.models.append((stage.name, model_dir))
    return found


def _lock(target: Target) -> RunDirLock | None:
    return RunDirLock.acquire(target.base) if target.record is not None else None


def _finish(target: Target) -> Path:
    """Rebuild the run's reports, or write the model dir's analysis page; the page's path."""
    if target.record is not None:
        return rebuild(target.base)["report"]
    return write_analysis_page(target.base)


def probe_target(target: Target, task: ProbeTask, settings: ProbeSettings, data_dir: str | None = None,
                 say: Say = print) -> tuple[ProbeReport, Path]:
    """Probe every model of ``target`` on ``task``; (the stored report, the page showing it).

    Raises ``DataError`` naming a missing data file and ``ModelError`` a damaged model dir."""
    data = load_probe_data(task, data_dir, settings.train_sentences, settings.dev_sentences, settings.seed)
    path = analysis_path(target.base, "probe", task.name)
    fresh = ProbeReport(task=task.name, level=str(task.level), description=task.description,
                        labels=list(data.label_names), settings=asdict(settings))
    report = _merge(path, read_probe, fresh, say)
    with _lock(target) or _NoLock():
        for name, model_dir in target.models:
            opened = open_model(model_dir)
            control = ", and a random encoder of its shape" if settings.control else " (no random-encoder control)"
            say(f"probing {name} ({model_dir}) on {task.name}: {len(data.train)} train and {len(data.dev)} dev "
                f"sentences, every layer{control}")
            report.put(probe_model(opened.model, opened.tokenizer, data, settings, name, str(model_dir)))
            write_json_atomic(path, report.to_dict())
        return report, _finish(target)


def _merge(path: Path, read, fresh, say: Say):
    """The stored report at ``path`` when it was made with ``fresh``'s settings, else ``fresh``."""
    if not path.is_file():
        return fresh
    stored = read(path)
    if _as_stored(stored.settings) == _as_stored(fresh.settings):  # a tuple is read back as a list
        return stored
    say(f"{path}: made with other settings; its results are replaced")
    return fresh


def _as_stored(settings: object) -> object:
    """``settings`` as they read back from their JSON file (tuples become lists)."""
    return json.loads(json.dumps(asdict(settings) if is_dataclass(settings) else settings, default=str))


class _NoLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def head_lineage(record: RunRecord, name: str) -> tuple[list[list[int]], list[int]] | None:
    """(each head's index before pruning, per layer; heads per layer before pruning) of stage
    ``name``, composed along its parent chain; None when no ``prune_heads`` step recorded which
    heads it kept (or the stage's root has no recorded shape)."""
    chain, seen = [], set()
    stage = record.stage(name)
    while stage is not None and stage.name not in seen:
        chain.append(stage)
        seen.add(stage.name)
        stage = record.stage(stage.parent) if stage.parent else None
    root = chain[-1].shape or {}
    if not isinstance(root.get("layers"), int):
        return None
    heads = list(root.get("heads_per_layer") or [root.get("heads")] * root["layers"])
    original, pruned = [list(range(int(h))) for h in heads], False
    for step in reversed(chain[:-1]):
        made = step.info.compress
        if step.compress_step == "prune_heads" and made is not None and made.kept is not None:
            original = [[row[k] for k in kept] for row, kept in zip(original, made.kept, strict=True)]
            pruned = True
        elif step.compress_step == "drop_layers" and made is not None and made.dropped is not None:
            gone = set(made.dropped)
            original = [row for i, row in enumerate(original) if i not in gone]
            heads = [h for i, h in enumerate(heads) if i not in gone]
    return (original, [int(h) for h in heads]) if pruned else None


def training_counts(task: ProbeTask, tokenizer, data_dir: str | None, max_length: int = 512):
    """Word-piece counts ``(vocab,)`` of ``task``'s whole training split under ``tokenizer``."""
    texts, _ = read_split(task, "train", data_dir)
    items = encode_items(task.level, texts, tokenizer, max_length)
    return piece_counts(items.enc.input_ids, len(tokenizer))


def head_importance(opened: OpenedModel, task: ProbeTask, data_dir: str | Path | None,
                    settings: HeadSettings) -> tuple[list[list[float]] | None, str | None]:
    """(Taylor importance per layer and head, normalised per layer as pruning ranks them; None)
    when the model's head was trained for ``task``'s tinyplm task, else (None, why not). The
    scores come from :func:`tinyplm.compress.importance.importance` on training batches (the
    analysis in ``evaluate`` measures no importance itself: pruning's scores are compress's)."""
    target = get_task(task.task, data_dir)
    if task.level == Level.WORD and task.column != "tags":
        return None, f"no trained head predicts {task.name} labels (importance needs the task loss)"
    if not opened.trained_head or opened.head != target.head or len(opened.labels) != len(target.labels):
        return None, (f"the model has no trained {target.head} head with {len(target.labels)} labels for "
                      f"{target.name} (importance needs the task loss)")
    limit = settings.importance_batches * settings.batch_size * 4
    enc = encode_split(target.read("train"), opened.tokenizer, settings.max_length, limit=limit)
    scores = importance(opened.model, enc, batches=settings.importance_batches, batch_size=settings.batch_size,
                        seed=settings.seed, head=opened.head)
    opened.model.eval()
    return [s.tolist() for s in scores.normalised().heads], None


def heads_target(target: Target, task: ProbeTask, settings: HeadSettings, data_dir: str | None = None,
                 say: Say = print) -> tuple[HeadsReport, Path]:
    """Head statistics of every model of ``target`` on ``task``'s dev sentences; (the stored
    report, the page showing it). Raises ``DataError``, ``ModelError`` or ``ValueError`` for an
    example sentence or shown head that does not exist."""
    data = load_probe_data(task, data_dir, train_limit=0, dev_limit=settings.sentences, seed=settings.seed)
    path = analysis_path(target.base, "heads", task.name)
    fresh = HeadsReport(task=task.name, settings=asdict(settings), threshold=settings.threshold)
    report = _merge(path, read_heads, fresh, say)
    counts: dict[str, object] = {}  # per tokenizer file set: a trimmed vocabulary has its own ids
    with _lock(target) or _NoLock():
        for name, model_dir in target.models:
            opened = open_model(model_dir)
            key = str(len(opened.tokenizer)) + str(opened.tokenizer.convert_ids_to_tokens(list(range(50))))
            if key not in counts:
                say(f"counting {task.task} training word pieces for rarity ({name}'s tokenizer)")
                counts[key] = training_counts(task, opened.tokenizer, data_dir)
            say(f"heads of {name} ({model_dir}) on {len(data.dev)} {task.name} dev sentences")
            stage = analyse_heads(opened.model, opened.tokenizer, task.level, data.dev.texts, counts[key],
                                  settings, name)
            stage.model_dir = str(model_dir)
            scores, stage.importance_note = head_importance(opened, task, data_dir, settings)
            if scores is not None:
                stage.stats["importance"] = scores
            lineage = head_lineage(target.record, name) if target.record is not None else None
            if lineage is not None and [len(row) for row in lineage[0]] == stage.heads_per_layer:
                stage.original, stage.original_heads = lineage
            report.put(stage)
            write_json_atomic(path, report.to_dict())
        return report, _finish(target)
