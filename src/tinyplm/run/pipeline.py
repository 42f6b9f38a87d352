"""run(cfg) -> RunRecord: the only place that knows the order of the stages.

preflight -> claim the run dir -> task data -> teacher (fine-tuned if asked) -> students
(distilled) -> their compression steps -> measure all side by side -> report. Every stage's
output is saved in the run dir as it completes, so ``resume`` skips finished stages and
continues an interrupted one from its last checkpoint.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path

import torch
import yaml

from tinyplm.config.changes import resume_blockers
from tinyplm.config.load import dump_resolved
from tinyplm.config.schema import FinalSpec, RunConfig, student_name
from tinyplm.distill import default_cache_dir
from tinyplm.errors import RunDirError
from tinyplm.evaluate.cpu_kind import cpu_kind
from tinyplm.evaluate.model_eval import encode_evals, evaluate_model
from tinyplm.evaluate.speed import protocol
from tinyplm.files import RESOLVED, claim_run_dir, reuse_finished
from tinyplm.models import (
    fingerprint,
    quiet_transformers,
    resolve_model_dir,
    save_model,
    shape_of,
)
from tinyplm.models.head_loading import load_for_head
from tinyplm.models.infer import precision_facts, use_bf16
from tinyplm.report import RunRecord, write_all
from tinyplm.report.info import StageInfo
from tinyplm.report.records import StageKind
from tinyplm.report.run_info import CutTexts, Machine, RunInfo, RunPrecision
from tinyplm.run.compress import run_compress
from tinyplm.run.cut_texts import cut_texts
from tinyplm.run.final import place_final
from tinyplm.run.input_files import check_same_inputs
from tinyplm.run.inputs import LogitsSource, RunInputs, RunPaths, StageData, Teachers, stamp_task
from tinyplm.run.measure import measure_stages
from tinyplm.run.preflight import Preflight, preflight
from tinyplm.run.results import StageResult, train_info
from tinyplm.run.students import run_student
from tinyplm.run.tracking import tracked
from tinyplm.tasks.base import TaskData
from tinyplm.tasks.encoding import encode_split
from tinyplm.tasks.holdout import HOLDOUT, selection_evals, selection_metric
from tinyplm.track import check_available
from tinyplm.train import StageIO, get_accelerator, train
from tinyplm.train.prediction import PredictionObjective

RESULTS = "results.json"

log = logging.getLogger(__name__)


def run_dir_of(cfg: RunConfig) -> Path:
    """The run directory a recipe writes to."""
    return Path(cfg.output_dir.replace("{name}", cfg.name))


def run(cfg: RunConfig, run_dir: Path | None = None, *, resume: bool = False, force: bool = False,
        parent_run_id: str | None = None) -> RunRecord:
    """Run a whole recipe in ``run_dir`` (default from the recipe) and write its reports; tracked
    as its ``tracking`` section says (``run.tracking``), as a child of the MLflow run
    ``parent_run_id`` when given (a sweep's trials).

    Raises ``TinyplmError`` subclasses for bad input (before anything is written: a tracking
    package that is asked for and missing first) and for a run dir that cannot be claimed (see
    ``files.claim_run_dir``); ``errors.Interrupted`` after a checkpoint when SIGINT/SIGTERM stops
    training.
    """
    check_available(cfg.tracking)
    quiet_transformers()
    acc = get_accelerator()
    run_dir = Path(run_dir or run_dir_of(cfg))
    started = time.time()
    checked = preflight(cfg, run_dir)  # bad input fails here, before the run dir is touched
    for note in checked.notes:
        log.warning("%s", note)
    claim = None
    with acc.main_process_first():
        if acc.is_main_process:
            claim = claim_run_dir(run_dir, dump_resolved(cfg), resume=resume, force=force, compare=resume_blockers)
    try:
        resumed = claim.resumed if claim else True
        if claim is not None:  # a resumed run's data must be what its checkpoints were trained on
            check_same_inputs(run_dir, data_files(cfg, checked.data), claim.resumed)
        with tracked(cfg, RunPaths(run_dir), resumed, parent_run_id) as tracker:
            record = _run_claimed(cfg, RunPaths(run_dir), checked, resumed, started)
            tracker.finish(record, run_dir)
        return record
    finally:
        if claim is not None:
            claim.release()


def data_files(cfg: RunConfig, data) -> dict[str, Path]:
    """The files a run's data comes from, by role: its splits' sources (``train``, ``eval NAME``) and
    its corpus paths (``corpus I``); :func:`~tinyplm.run.input_files.fingerprints` keeps the files."""
    roles = {"train": data.train.source, **{f"eval {name}": split.source for name, split in data.evals.items()}}
    roles |= {f"corpus {i}": p for i, p in enumerate(cfg.corpus.paths if cfg.corpus else ())}
    return {role: Path(p) for role, p in roles.items() if p is not None}


def run_or_reuse(cfg: RunConfig, run_dir: Path | None = None, *, parent_run_id: str | None = None) -> RunRecord:
    """The record of a finished run of exactly this recipe in ``run_dir`` if there is one
    (:func:`finished_record`); else the run, continued from its checkpoints if an unfinished one is
    there. The one rule for benchmarks that reuse runs. A run that does run is tracked as a child of
    ``parent_run_id`` when given (a sweep's trial)."""
    run_dir = Path(run_dir or run_dir_of(cfg))
    record = finished_record(cfg, run_dir)
    return record if record is not None else run(cfg, run_dir, resume=True, parent_run_id=parent_run_id)


def finished_record(cfg: RunConfig, run_dir: Path | None = None) -> RunRecord | None:
    """The record of a finished run of exactly this recipe in ``run_dir``; None when there is none
    (no run, or an unfinished one). A finished run of *another* recipe is refused (``RunDirError``).

    A run reached through another path to the same directory (a linked folder) is the same run:
    its stored ``output_dir`` is not a difference. A recipe names its teacher by path, so the same
    recipe over a teacher whose weights changed since (fine-tuned again into the same folder) is
    another run: refused too, when the finished run recorded its teacher's fingerprint."""
    run_dir = Path(run_dir or run_dir_of(cfg))
    if not reuse_finished(run_dir, dump_resolved(_as_stored(cfg, run_dir))):
        return None
    record = RunRecord.load(run_dir / RESULTS)
    recorded = record.info.teacher_fingerprint
    teacher = resolve_model_dir(cfg.teacher.model)  # a run recorded before fingerprints read layouts: legacy
    if recorded is not None and recorded not in (fingerprint(teacher), fingerprint(teacher, legacy=True)):
        raise RunDirError(f"{run_dir}: a finished run of this recipe is there, but its teacher "
                          f"{cfg.teacher.model} has other weights now (sha256 differs from the run's); "
                          "choose another output dir (or remove it) to run again")
    return record


def _as_stored(cfg: RunConfig, run_dir: Path) -> RunConfig:
    """``cfg`` with the ``output_dir`` its run dir's stored recipe names, when both name this dir."""
    stored = run_dir / RESOLVED
    if not stored.is_file():
        return cfg
    try:
        named = yaml.safe_load(stored.read_text(encoding="utf-8")).get("output_dir")
    except (yaml.YAMLError, AttributeError, UnicodeDecodeError):
        return cfg
    if isinstance(named, str) and Path(named.replace("{name}", cfg.name)).resolve() == run_dir.resolve():
        return cfg.model_copy(update={"output_dir": named})
    return cfg


def _run_claimed(cfg: RunConfig, paths: RunPaths, checked: Preflight, resumed: bool, started: float) -> RunRecord:
    acc = get_accelerator()
    inp, teacher, cut = _inputs(cfg, paths, checked, resumed)
    stages = [teacher]
    reported = {"teacher"}
    for spec in cfg.students:
        student = run_student(spec, inp)
        view = student.inputs or inp  # in the student's own token ids when it has its own tokenizer
        inp.students[student_name(spec)] = student.model
        if view.own is not None:
            inp.student_tokens[student_name(spec)] = view.own
        if student.result is not None:
            stages.append(student.result)
            reported.add(student.result.name)
        parent = student.parent if student.parent in reported else None
        for result in run_compress(spec, student.model, view, parent):
            stages.append(result)
            reported.add(result.name)
    record = RunRecord(task=checked.data.task, metric=checked.data.primary_metric,
                       info=run_info(cfg, paths.root, started, checked.teacher_dir, checked.data))
    record.info.cut = cut or None
    if acc.is_main_process:
        record.stages = measure_stages(stages, paths.root, inp.data, inp.evals, cfg.measure)
        record.info.measurement = protocol(cfg.measure, cfg.measure.threads or torch.get_num_threads(),
                                           len(next(iter(inp.evals.values()))))
        finish(record, paths.root, cfg.final)
    acc.wait_for_everyone()
    return record


def _inputs(cfg: RunConfig, paths: RunPaths, checked: Preflight,
            resumed: bool) -> tuple[RunInputs, StageResult, list[CutTexts]]:
    """Encode the task, prepare the teacher, and gather what the stages share -> (the shared
    inputs, the teacher's stage, the splits of which ``task.max_length`` cuts examples, each logged)."""
    data, tok, task = checked.data, checked.tokenizer, cfg.task
    train_enc = encode_split(data.train, tok, task.max_length, task.max_train_examples)
    evals = encode_evals(data, tok, task.max_length, task.max_eval_examples)
    cut = cut_texts({"train": (data.train, train_enc), **{k: (data.evals[k], e) for k, e in evals.items()}},
                    tok, task.max_length)
    for split in cut:
        log.warning("task.max_length: %s; raise it to read more of them (at a cost in time)", split.sentence())
    cache = Path(cfg.cache_dir) if cfg.cache_dir else default_cache_dir()
    teacher, tok, info = prepare_teacher(cfg, checked, train_enc, evals, paths, resumed)
    source = cfg.teacher.logits_from
    logits_from = (None if source is None else
                   LogitsSource(source, paths.student(source), (data.labels, data.is_regression, data.head)))
    teachers = Teachers(teacher, paths.root / "teacher", checked.teacher_dir, cfg.teacher.logits_precision, cache,
                        logits_from)
    stage_data = StageData(task, data, tok, train_enc, cfg.augment, cfg.corpus, paths, cache)
    inp = RunInputs(task, data, tok, train_enc, evals, teachers, stage_data, paths, cfg.measure)
    return inp, StageResult("teacher", teacher, "teacher", StageKind.TEACHER, shape_of(teacher), info=info), cut


def prepare_teacher(cfg: RunConfig, checked: Preflight, train_enc, evals, paths: RunPaths, resumed: bool):
    """Load the teacher and, if the recipe asks, fine-tune it on ``train_enc`` (evaluated on
    ``evals``); saved to ``RUN_DIR/teacher`` -> (model, tokenizer, info for the report)."""
    out, data = paths.root / "teacher", checked.data
    if resumed and (done := paths.finished(out)) is not None:
        model, tok = load_for_head(out, data.labels, data.is_regression, data.head)
        return model, tok, replace(StageInfo.from_saved(done), reused=True)
    # preflight let it through: a head that fits, one teacher.finetune replaces, or none where no stage reads it
    torch.manual_seed(cfg.teacher.finetune.seed if cfg.teacher.finetune else 0)  # a new head: the same every run
    model, tok = load_for_head(checked.teacher_dir, data.labels, data.is_regression, data.head, replace_head=True)
    info = StageInfo(source=str(cfg.teacher.model), init=checked.head_note)
    if cfg.teacher.finetune is not None:
        spec = cfg.teacher.finetune
        objective = PredictionObjective(kd_weight=0.0, hard_weight=1.0, is_regression=data.is_regression,
                                        head=data.head, class_weights=data.class_weights)
        io = StageIO("teacher", paths.checkpoints("teacher"), paths.log, resume=True)
        bf16 = use_bf16(spec.eval_precision)
        chosen_on, size = selection_evals(data, evals), spec.eval_batch_size
        result = train(model, train_enc, objective, spec=spec, io=io, primary=selection_metric(data),
                       evaluate=lambda m: evaluate_model(m, data, chosen_on, bf16=bf16, batch_size=size))
        model = result.model
        info.training = [train_info(result, spec, {"hard_weight": 1.0})]
    if get_accelerator().is_main_process:
        stamp_task(model, cfg.task)
        save_model(model, tok, out)
        paths.save_info(out, info)
    get_accelerator().wait_for_everyone()
    return model, tok, info


def run_info(cfg: RunConfig, run_dir: Path, started: float, teacher_dir: Path, data: TaskData) -> RunInfo:
    """Run-level facts for the report: name, dir, date, machine, processes, the sha256 of the
    teacher's weights as read (what makes a finished run reusable, see :func:`run_or_reuse`), and
    the held-out examples the run chooses on, if any (``tasks.holdout``)."""
    held, kind = data.evals.get(HOLDOUT), cpu_kind()
    return RunInfo(
        run_name=cfg.name,
        run_dir=str(run_dir),
        created=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
        started_unix=round(started, 3),
        machine=Machine(cpu=kind.model, kind=kind.described(), int8_note=kind.int8_note,
                        threads=torch.get_num_threads(), torch=torch.__version__, **precision_facts()),
        precision=RunPrecision(metrics=cfg.measure.precision,
                               teacher_logits=cfg.teacher.logits_from or cfg.teacher.logits_precision),
        processes=get_accelerator().num_processes,
        teacher_fingerprint=fingerprint(teacher_dir),
        selection_metric=selection_metric(data) if held is not None else None,
        holdout=len(held) if held is not None else None,
        guard_metrics=list(data.guard_metrics) or None,
    )


def finish(record: RunRecord, run_dir: Path, final: FinalSpec | None = None) -> None:
    """Copy the final model (``final``'s rule, :func:`tinyplm.run.final.place_final`) to ``model/``
    and write every report; results.json marks the run done."""
    record.info.seconds = round(time.time() - record.info.started_unix, 1)
    place_final(record, run_dir, final or FinalSpec())
    write_all(record, run_dir)
