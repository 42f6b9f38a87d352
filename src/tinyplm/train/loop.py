"""The one training loop: fine-tuning, distillation, pre-training and head fitting alike, one
process or several.

Everything specific to a kind of training is its :class:`~tinyplm.train.objective.Objective`.
Device and process count come from ``accelerate`` (``accelerate launch --num_processes 2`` on CPU
uses gloo). Each global batch is split across processes and DDP averages their gradients, so the
global batch size is the recipe's whatever the process count (updates match a one-process run
closely, not exactly: per-process losses are means over unequal shares). Data order is a seeded
permutation per epoch, so ``resume`` after a kill continues with the same batches, RNG and
optimiser state. SIGINT/SIGTERM stop after the current step with a checkpoint
(``errors.Interrupted``), so ``--resume`` continues from that step.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from torch import nn

from tinyplm.config.finetune import Method
from tinyplm.config.schema import TrainSpec
from tinyplm.errors import Interrupted
from tinyplm.models.infer import autocast, use_bf16
from tinyplm.tasks.encoding import Encoded, collate
from tinyplm.train.accelerator import get_accelerator, release, synced
from tinyplm.train.checkpoint import LoopState, latest_whole, load_checkpoint, load_extra, save_checkpoint
from tinyplm.train.diverged import stage_diverged
from tinyplm.train.memory import read_peak, reset_peak
from tinyplm.train.methods import adapt, finish, param_counts
from tinyplm.train.objective import Batch, Objective
from tinyplm.train.optim import optimizer
from tinyplm.train.progress import JsonlLog, Meter, make_progress
from tinyplm.train.schedule import epoch_batches, lr_factor, total_steps
from tinyplm.train.signals import StopFlag
from tinyplm.train.stage_eval import evaluate_stage, last_evaluation, weights_diverged_unscored
from tinyplm.train.start_average import StartWeights
from tinyplm.train.ulmfit import Unfreezer, layer_groups, say_shortfall, stlr_factor
from tinyplm.train.weight_average import AVERAGE_FILE, WeightAverage

log = logging.getLogger(__name__)

EvalFn = Callable[[torch.nn.Module], dict[str, float]]


@dataclass(frozen=True)
class StageIO:
    """Where a stage writes: its name (in logs and the progress bar), its checkpoint folder, its
    JSONL log (None: no log), whether it continues from its last checkpoint, and whether a
    progress bar is shown (on the main process)."""

    name: str
    checkpoint_dir: Path
    log_path: Path | None
    resume: bool = False
    show_progress: bool = True


@dataclass(kw_only=True)
class TrainResult:
    """The trained model (best dev checkpoint if ``keep_best``) and what happened: dev
    evaluations (``history``) and the mean training loss at each log step (``losses``, pairs of
    step and loss); the parameters that trained (at the last step) and all of them, and the
    stage's peak resident memory (``rss_scope``: ``stage``, or ``process`` where it could not be
    reset at the stage's start). Built by keyword only (twelve fields, most of one type)."""

    model: torch.nn.Module
    history: list[dict[str, Any]] = field(default_factory=list)
    best_metric: float | None = None
    best_step: int | None = None
    steps: int = 0
    seconds: float = 0.0
    stopped_by: str = "epochs"
    losses: list[tuple[int, float]] = field(default_factory=list)
    trainable_params: int | None = None
    total_params: int | None = None
    peak_rss_mib: float | None = None
    rss_scope: str | None = None

    def resources(self) -> dict[str, Any]:
        """What the stage cost, for its info in results.json: trainable and total parameters,
        the trainable share, peak RSS (MiB) and its scope, training seconds."""
        share = self.trainable_params / self.total_params if self.trainable_params is not None and \
            self.total_params else None
        return {"trainable_params": self.trainable_params, "total_params": self.total_params,
                "trainable_share": None if share is None else round(share, 6),
                "peak_rss_mib": self.peak_rss_mib, "rss_scope": self.rss_scope,
                "train_seconds": round(self.seconds, 1)}


class Trainable(nn.Module):
    """The model plus the objective's learned parts (projections, generators), trained and saved
    together: one ``accelerate``-prepared module (DDP across processes) covers every trained
    parameter, and the loss is computed inside ``forward`` so DDP sees them all used."""

    def __init__(self, model: nn.Module, objective: Objective) -> None:
        super().__init__()
        self.student = model
        self.objective = objective if isinstance(objective, nn.Module) else None
        self._objective = objective

    def forward(self, batch: Batch, teacher_out: Any) -> torch.Tensor:
        return self._objective.loss(self.student, batch, teacher_out)


@dataclass
class _Loop:
    """Objects one run of the loop shares between its helpers."""

    acc: Accelerator
    model: torch.nn.Module  # the prepared Trainable
    opt: torch.optim.Optimizer
    spec: TrainSpec
    io: StageIO
    log: JsonlLog
    state: LoopState
    objective: Objective
    teacher: nn.Module | None = None
    teacher_logits: torch.Tensor | None = None
    best: dict[str, torch.Tensor] | None = None
    step_hook: Callable[[float], None] | None = None
    evaluate: EvalFn | None = None
    primary: str | None = None
    unfreeze_groups: list[list[nn.Parameter]] | None = None  # ULMFiT's layer groups, top first
    unfreezer: Unfreezer | None = None  # ULMFiT's gradual unfreezing, set when the steps start
    start: StartWeights | None = None  # keep_start_weights: evaluations and the result blend these in
    average: WeightAverage | None = None  # ema_decay: evaluations and the result use the average

    @property
    def unwrapped(self) -> Trainable:
        return self.acc.unwrap_model(self.model)

    @property
    def student(self) -> nn.Module:
        return self.unwrapped.student


def _start_objective(objective: Objective, model: torch.nn.Module, data: Encoded, teacher: nn.Module | None,
                     teacher_logits: torch.Tensor | None, name: str) -> None:
    """Check that ``objective`` has what it needs and can train ``model``, then run its optional
    ``start`` hook (train/objective.py) on the training data."""
    if objective.needs_teacher_logits and teacher_logits is None:
        raise ValueError(f"stage {name}: objective needs teacher logits")
    if objective.needs_teacher and teacher is None:
        raise ValueError(f"stage {name}: its teacher-side terms (layer-wise, masked-LM) need the teacher model")
    objective.check(model, teacher)
    start = getattr(objective, "start", None)
    if callable(start):
        start(model, data, teacher_logits)


def train(
    model: torch.nn.Module,
    data: Encoded,
    objective: Objective,
    *,
    spec: TrainSpec,
    io: StageIO,
    evaluate: EvalFn | None = None,
    primary: str | None = None,
    teacher_logits: torch.Tensor | None = None,
    teacher: nn.Module | None = None,
    step_hook: Callable[[float], None] | None = None,
) -> TrainResult:
    """Train ``model`` on ``data`` with ``objective`` under ``spec``; see the module docstring.

    ``evaluate(model) -> metrics`` runs every ``spec.eval_every`` steps and at the end; the best
    ``primary`` metric's weights are restored when ``spec.keep_best``. ``teacher_logits``
    ``(examples, ...)`` and ``teacher`` are given when the objective needs them.
    ``step_hook(progress)`` is called after every optimiser step with the stage's progress in
    [0, 1] (steps or time budget, whichever is further along): pruning schedules follow it.
    ``spec.method`` chooses what trains (train/methods.py): the model is adapted first and finished
    after (LoRA/IA3 merged), so ``TrainResult.model`` is what later stages take; evaluations and
    the result blend in the start by ``keep_start_weights`` (train/start_average.py) or use the
    weights' moving average by ``ema_decay`` (train/weight_average.py).
    Raises ``ValueError`` when the objective's needs are not met, ``errors.Interrupted`` (after a
    checkpoint) on SIGINT/SIGTERM.
    """
    acc = get_accelerator()
    _check_method(spec, io, acc)
    stage_rss = reset_peak()
    start = StartWeights.of(model, spec.keep_start_weights)  # before adapt or resume: the stage's start
    model = adapt(model, spec)
    _start_objective(objective, model, data, teacher, teacher_logits, io.name)
    torch.manual_seed(spec.seed + acc.process_index)
    trainable = Trainable(model, objective)
    prepared, opt = acc.prepare(trainable, optimizer(trainable, model, spec))
    log = JsonlLog(io.log_path, io.name, acc.is_main_process)
    loop = _Loop(acc, prepared, opt, spec, io, log, LoopState(), objective, teacher, teacher_logits,
                 step_hook=step_hook, evaluate=evaluate, primary=primary,
                 unfreeze_groups=layer_groups(model) if spec.method is Method.ULMFIT else None, start=start,
                 average=WeightAverage.of(model, spec.ema_decay))
    if teacher is not None:
        teacher.eval()
    if io.resume:
        _resume(loop)
    stopped_by = _run_steps(loop, data)
    say_shortfall(loop.unfreezer, loop.state.step, io.name, loop.log)
    stopped_by = last_evaluation(loop, stopped_by)
    _final_weights(loop)
    loop.student.train(False)
    loop.log.write(event="end", step=loop.state.step, elapsed_s=round(loop.state.elapsed, 2),
                   stopped_by=stopped_by, best_step=loop.state.best_step, best_metric=loop.state.best_metric)
    s, student = loop.state, loop.student
    counts, peak = param_counts(student), read_peak(stage_rss)
    release(acc)  # drop the accelerator's references to this stage's model and optimiser
    return TrainResult(model=finish(student, spec), history=s.history, best_metric=s.best_metric,
                       best_step=s.best_step, steps=s.step, seconds=s.elapsed, stopped_by=stopped_by,
                       losses=[(int(a), float(b)) for a, b in s.losses], trainable_params=counts.trainable,
                       total_params=counts.total, peak_rss_mib=peak.mib, rss_scope=peak.scope)


def _final_weights(loop: _Loop) -> None:
    """Put the weights the stage returns into the student: the kept best checkpoint's (with the
    average's weights when there is one), else the average, then the start's blend if any."""
    if loop.spec.keep_best and loop.best is not None:
        loop.unwrapped.load_state_dict(loop.best)
    elif loop.average is not None:
        loop.average.copy_into(loop.student)
    if loop.start is not None:
        loop.start.blend_into(loop.student)


def _check_method(spec: TrainSpec, io: StageIO, acc: Accelerator) -> None:
    """Raise ``ValueError`` for a method this process layout cannot run."""
    if spec.method is Method.ULMFIT and acc.num_processes > 1:
        raise ValueError(f"stage {io.name}: method ulmfit unfreezes layers during training, which DDP across "
                         f"{acc.num_processes} processes does not allow; run it in one process")


def _resume(loop: _Loop) -> None:
    """Continue from the newest whole checkpoint; a damaged newer one is passed over, said in the
    log and on stderr (``latest_whole`` refuses when none is whole)."""
    path, passed = latest_whole(loop.io.checkpoint_dir)
    for damage in passed:
        log.warning("%s: a damaged checkpoint (%s); continuing from the one before it", loop.io.name, damage)
        loop.log.write(event="damaged_checkpoint", damage=damage)
    if path is None:
        return
    state, best, rng = load_checkpoint(path, loop.unwrapped, loop.opt)
    loop.state, loop.best = state, best
    average = load_extra(path, AVERAGE_FILE) if loop.average is not None else None
    if average is not None:
        loop.average.load(average)
    if loop.acc.process_index in rng:
        torch.set_rng_state(rng[loop.acc.process_index])
    loop.log.write(event="resume", step=state.step, checkpoint=path.name)


def _run_steps(loop: _Loop, data: Encoded) -> str:
    """Run optimiser steps until epochs, max_steps or the time budget end; return which one."""
    acc, spec, state = loop.acc, loop.spec, loop.state
    lengths = data.lengths() if spec.group_by_length else None
    total, per_epoch = total_steps(spec, len(data), acc.num_processes, lengths, data.groups)
    budget_s = spec.budget_minutes * 60 if spec.budget_minutes else None
    meter = Meter()
    unfreezer = loop.unfreezer = None if loop.unfreeze_groups is None else \
        Unfreezer(loop.unfreeze_groups, spec.method_options.unfreeze_every or per_epoch)
    loop.model.train()
    with make_progress(acc.is_main_process and loop.io.show_progress) as bar, StopFlag() as stop:
        task = bar.add_task(loop.io.name, total=total, completed=state.step, loss=0.0, eps=0.0)
        while state.step < total:
            epoch, offset = divmod(state.step, per_epoch)
            for global_batch in epoch_batches(len(data), spec.batch_size, spec.seed, epoch, acc.num_processes,
                                              lengths, data.groups)[offset:]:
                progress = max(state.step / total, state.elapsed / budget_s if budget_s else 0.0)
                t0 = time.perf_counter()
                if unfreezer is not None:
                    unfreezer.apply(state.step)
                loss = _step(loop, data, global_batch, _lr_factor(spec, progress))
                meter.add(loss, len(global_batch), time.perf_counter() - t0)
                state.step += 1
                elapsed, signum = synced(acc, time.perf_counter() - t0, float(stop.signum or 0))
                state.elapsed += elapsed
                if loop.step_hook is not None:
                    loop.step_hook(max(state.step / total, state.elapsed / budget_s if budget_s else 0.0))
                if (state.step % spec.log_every == 0 or state.step == total) and \
                        _log_train(loop, meter.pop(), bar, task, total, budget_s):
                    return "diverged"
                if signum:
                    _interrupt(loop, int(signum))
                if _between_steps(loop):
                    return "diverged"
                if state.step >= total:
                    return "max_steps" if spec.max_steps and total == spec.max_steps else "epochs"
                if budget_s and state.elapsed >= budget_s:
                    return "budget"
    return "epochs"


def _lr_factor(spec: TrainSpec, progress: float) -> float:
    """The schedule's LR factor: ULMFiT's slanted triangle, else warm-up then linear decay."""
    if spec.method is Method.ULMFIT:
        return stlr_factor(progress, spec.method_options)
    return lr_factor(progress, spec.warmup_ratio)


def _between_steps(loop: _Loop) -> bool:
    """Evaluation and checkpoints due after this step; their time counts towards the budget. True
    when the stage ends as diverged, found before an evaluation
    (:func:`~tinyplm.train.stage_eval.weights_diverged_unscored`)."""
    spec, state = loop.spec, loop.state
    t1 = time.perf_counter()
    if loop.evaluate and spec.eval_every and state.step % spec.eval_every == 0:
        if weights_diverged_unscored(loop):
            return True
        evaluate_stage(loop)
    if spec.checkpoint_every and state.step % spec.checkpoint_every == 0:
        _checkpoint(loop)  # the saved elapsed time covers every step before it
    state.elapsed += synced(loop.acc, time.perf_counter() - t1)[0]
    return False


def _interrupt(loop: _Loop, signum: int) -> None:
    """A stop signal arrived: checkpoint this step, log it, raise ``Interrupted``."""
    path = _checkpoint(loop)
    loop.log.write(event="interrupted", step=loop.state.step, signal=signum, checkpoint=path)
    raise Interrupted(signum, loop.state.step, path)


def _step(loop: _Loop, data: Encoded, global_batch: list[int], factor: float) -> float:
    acc, objective = loop.acc, loop.objective
    local = global_batch[acc.process_index :: acc.num_processes]
    for group in loop.opt.param_groups:  # ULMFiT's groups carry their discriminative lr_scale
        group["lr"] = loop.spec.lr * factor * group["lr_scale"] if "lr_scale" in group else loop.spec.lr * factor
    batch = objective.prepare(collate(data, local))  # may draw masks from the checkpointed RNG
    if loop.teacher_logits is not None:
        batch.teacher_logits = loop.teacher_logits[batch.index]
    with autocast(use_bf16(loop.spec.precision)):
        teacher_out = None
        if loop.teacher is not None and objective.needs_teacher:
            with torch.no_grad():
                teacher_out = objective.teacher_outputs(loop.teacher, batch)
        loss = loop.model(batch, teacher_out)
    acc.backward(loss)
    if loop.spec.grad_clip > 0:
        acc.clip_grad_norm_(loop.model.parameters(), loop.spec.grad_clip)
    loop.opt.step()
    loop.opt.zero_grad(set_to_none=True)
    if loop.average is not None:
        loop.average.update(loop.student)
    return float(loss.detach())


def _log_train(loop: _Loop, loss_eps: tuple[float, float], bar, task, total: int, budget_s: float | None) -> bool:
    """Log the last steps' loss; True when the stage ends as diverged (:mod:`tinyplm.train.diverged`)."""
    state = loop.state
    loss, eps = loss_eps
    lr = loop.opt.param_groups[0]["lr"]
    state.losses.append([state.step, round(loss, 6)])
    loop.log.write(event="train", step=state.step, loss=round(loss, 6), lr=lr,
                   examples_per_s=round(eps, 1), elapsed_s=round(state.elapsed, 2))
    expected = total
    if budget_s and state.elapsed > 0:
        expected = min(total, max(state.step, int(state.step * budget_s / state.elapsed)))
    bar.update(task, completed=state.step, total=expected, loss=loss, eps=eps)
    return stage_diverged(loop, loss, lr)  # after the log line that shows it


def _checkpoint(loop: _Loop) -> str | None:
    """Write a checkpoint of this step (rank 0); returns its folder name there, else None."""
    acc = loop.acc
    rng = torch.get_rng_state()
    if acc.num_processes > 1:
        gathered = [torch.empty_like(rng) for _ in range(acc.num_processes)]
        torch.distributed.all_gather(gathered, rng)
        rngs = dict(enumerate(gathered))
    else:
        rngs = {0: rng}
    name = None
    if acc.is_main_process:
        extra = {AVERAGE_FILE: loop.average.state()} if loop.average is not None else None
        path = save_checkpoint(loop.io.checkpoint_dir, loop.unwrapped, loop.opt, loop.state, loop.best, rngs, extra)
        loop.log.write(event="checkpoint", step=loop.state.step, path=path.name)
        name = path.name
    acc.wait_for_everyone()
    return name
