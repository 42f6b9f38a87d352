"""The one training loop: fine-tuning, distillation and pre-training alike, one process or several.

Device and process count come from ``accelerate`` (``accelerate launch --num_processes 2`` on CPU
uses gloo). Each global batch is split across processes and DDP averages their gradients, so the
global batch size is the recipe's whatever the process count (updates match a one-process run
closely, not exactly: per-process losses are means over unequal shares). Data order is a seeded permutation per epoch, so
``resume`` after a kill continues with the same batches, RNG and optimiser state.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from torch import nn
from accelerate import Accelerator
from accelerate.utils import DistributedDataParallelKwargs, broadcast

from tinyplm.config.schema import TrainSpec
from tinyplm.errors import DataError
from tinyplm.train.checkpoint import LoopState, list_checkpoints, load_checkpoint, save_checkpoint
from tinyplm.distill.features import Features, forward_features
from tinyplm.distill.losses import PredictionObjective
from tinyplm.distill.mlm import is_masked_lm, mlm_forward
from tinyplm.distill.objective import DistillObjective
from tinyplm.train.progress import JsonlLog, make_progress
from tinyplm.models.infer import autocast, use_bf16
from tinyplm.tasks.encoding import Encoded, collate, model_inputs


@runtime_checkable
class SelfSupervised(Protocol):
    """A pre-training objective (``tinyplm.pretrain.objective``): it prepares each collated batch
    (masking) and computes the loss by running the model itself."""

    needs_teacher: bool

    def prepare_batch(self, batch: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], Any]: ...

    def batch_loss(self, model: nn.Module, inputs: dict[str, torch.Tensor], targets: Any) -> torch.Tensor: ...


Objective = PredictionObjective | DistillObjective | SelfSupervised

EvalFn = Callable[[torch.nn.Module], dict[str, float]]

# Batches per length-sorted chunk when grouping by length (HF Trainer uses 50 too).
GROUP_CHUNK = 50


@dataclass(frozen=True)
class StageIO:
    """Where a stage writes: its name (in logs), checkpoint folder and JSONL log."""

    name: str
    checkpoint_dir: Path
    log_path: Path
    resume: bool = False


@dataclass
class TrainResult:
    """The trained model (best dev checkpoint if ``keep_best``) and what happened."""

    model: torch.nn.Module
    history: list[dict[str, Any]] = field(default_factory=list)
    best_metric: float | None = None
    best_step: int | None = None
    steps: int = 0
    seconds: float = 0.0
    stopped_by: str = "epochs"


_ACCELERATOR: Accelerator | None = None


def get_accelerator() -> Accelerator:
    """The process-wide Accelerator (created once; CPU; precision is handled by autocast here)."""
    global _ACCELERATOR
    if _ACCELERATOR is None:
        # Stages without a prediction term leave the classifier (and, with some layer maps,
        # whole sublayers) without gradients; DDP must be told, or it fails on the next step.
        ddp = DistributedDataParallelKwargs(find_unused_parameters=True)
        _ACCELERATOR = Accelerator(cpu=True, kwargs_handlers=[ddp])
    return _ACCELERATOR


def epoch_batches(
    n: int, batch_size: int, seed: int, epoch: int, world: int = 1, lengths: np.ndarray | None = None
) -> list[list[int]]:
    """Global index batches of one epoch, deterministic in (seed, epoch).

    With ``lengths``, examples are grouped by length: a seeded permutation is cut into chunks
    of ``GROUP_CHUNK`` batches, each chunk is sorted by length and cut into batches, and the
    batch order is shuffled. Batches then hold similar lengths and pad little (3.4x faster bf16
    training on SST-2 here). A final batch smaller than ``world`` is dropped so every process
    gets at least one example.
    """
    gen = torch.Generator().manual_seed(seed * 1000 + epoch)
    order = torch.randperm(n, generator=gen).tolist()
    if lengths is None:
        batches = [order[i : i + batch_size] for i in range(0, n, batch_size)]
    else:
        chunk = batch_size * GROUP_CHUNK
        batches = []
        for start in range(0, n, chunk):
            part = sorted(order[start : start + chunk], key=lambda i: (int(lengths[i]), i))
            batches += [part[i : i + batch_size] for i in range(0, len(part), batch_size)]
        shuffle = torch.randperm(len(batches), generator=gen).tolist()
        batches = [batches[i] for i in shuffle]
    return [b for b in batches if len(b) >= world]


def lr_factor(progress: float, warmup: float) -> float:
    """Linear warm-up over the first ``warmup`` fraction, then linear decay to 0 at progress 1."""
    progress = min(max(progress, 0.0), 1.0)
    if warmup > 0 and progress < warmup:
        return progress / warmup
    return max(0.0, (1.0 - progress) / max(1e-9, 1.0 - warmup))


def _param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if p.ndim < 2 or "LayerNorm" in name else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


class Trainable(nn.Module):
    """The student plus the objective's learned parts (projections), trained and saved together.

    ``forward(inputs)`` returns the student's :class:`Features` that the objective asks for, so
    one ``accelerate``-prepared module (DDP across processes) covers every trained parameter.
    """

    def __init__(self, student: nn.Module, objective: Objective) -> None:
        super().__init__()
        self.student = student
        self.objective = objective if isinstance(objective, nn.Module) else None
        self._prediction = objective if isinstance(objective, PredictionObjective) else None
        self.wants = objective.wants if isinstance(objective, DistillObjective) else frozenset()

    def forward(
        self, inputs: dict[str, torch.Tensor], labels: torch.Tensor, teacher: Features | None,
        teacher_logits: torch.Tensor | None,
    ) -> torch.Tensor:
        """The batch loss. Computed inside forward so DDP sees every trained parameter
        (projections included) used in one forward."""
        if isinstance(self.objective, SelfSupervised):  # pre-training: the objective runs the model
            return self.objective.batch_loss(self.student, inputs, labels)
        if self.objective is not None and self.objective.masked_lm:
            feats = mlm_forward(self.student, inputs, self.wants, labels)
        else:
            feats = forward_features(self.student, inputs, self.wants)
        if self.objective is not None:
            return self.objective.loss(feats, teacher, labels, teacher_logits)[0]
        return self._prediction(feats.logits.float(), labels, teacher_logits, feats.attention_mask)[0]


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
    best: dict[str, torch.Tensor] | None = None
    step_hook: Callable[[float], None] | None = None

    @property
    def unwrapped(self) -> Trainable:
        return self.acc.unwrap_model(self.model)

    @property
    def student(self) -> nn.Module:
        return self.unwrapped.student


def train(
    model: torch.nn.Module,
    data: Encoded,
    objective: Objective,
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
    ``primary`` metric's weights are restored when ``spec.keep_best``. ``teacher`` is run (no
    grad) on every batch when the objective has layer-wise terms. ``step_hook(progress)`` is called
    after every optimiser step with the stage's progress in [0, 1] (steps or time budget, whichever
    is further along): pruning schedules follow it. Raises ``ValueError`` if the objective needs
    teacher logits or a teacher that was not given.
    """
    if objective.needs_teacher and teacher_logits is None:
        raise ValueError(f"stage {io.name}: objective needs teacher logits")
    if isinstance(objective, DistillObjective) and objective.needs_teacher_features and teacher is None:
        raise ValueError(f"stage {io.name}: layer-wise terms need the teacher model")
    if isinstance(objective, DistillObjective) and objective.masked_lm and not (is_masked_lm(model) and is_masked_lm(teacher)):
        raise ValueError(f"stage {io.name}: masked-LM terms need a student and a teacher with MLM heads")
    acc = get_accelerator()
    torch.manual_seed(spec.seed + acc.process_index)
    trainable = Trainable(model, objective)
    opt = torch.optim.AdamW(_param_groups(trainable, spec.weight_decay), lr=spec.lr)
    prepared, opt = acc.prepare(trainable, opt)
    log = JsonlLog(io.log_path, io.name, acc.is_main_process)
    loop = _Loop(acc, prepared, opt, spec, io, log, LoopState(), objective, teacher, step_hook=step_hook)
    if teacher is not None:
        teacher.eval()
    if io.resume:
        _resume(loop)
    stopped_by = _run_steps(loop, data, objective, teacher_logits, evaluate, primary)
    if evaluate and (not loop.state.history or loop.state.history[-1]["step"] != loop.state.step):
        _evaluate(loop, evaluate, primary)
    if spec.keep_best and loop.best is not None:
        loop.unwrapped.load_state_dict(loop.best)
    loop.student.train(False)
    loop.log.write(event="end", step=loop.state.step, elapsed_s=round(loop.state.elapsed, 2),
                   stopped_by=stopped_by, best_step=loop.state.best_step, best_metric=loop.state.best_metric)
    s, student = loop.state, loop.student
    acc.free_memory()  # drop the accelerator's references to this stage's model and optimiser
    return TrainResult(student, s.history, s.best_metric, s.best_step, s.step, s.elapsed, stopped_by)


def _resume(loop: _Loop) -> None:
    ckpts = list_checkpoints(loop.io.checkpoint_dir)
    if not ckpts:
        return
    state, best, rng = load_checkpoint(ckpts[-1], loop.unwrapped, loop.opt)
    loop.state, loop.best = state, best
    if loop.acc.process_index in rng:
        torch.set_rng_state(rng[loop.acc.process_index])
    loop.log.write(event="resume", step=state.step, checkpoint=ckpts[-1].name)


def _total_steps(spec: TrainSpec, n: int, world: int, lengths: np.ndarray | None) -> tuple[int, int]:
    per_epoch = len(epoch_batches(n, spec.batch_size, spec.seed, 0, world, lengths))
    if per_epoch == 0:
        raise DataError(f"no training batches: {n} training examples for {world} processes")
    total = math.ceil(spec.epochs * per_epoch)
    if spec.max_steps:
        total = min(total, spec.max_steps)
    return total, per_epoch


def _run_steps(loop: _Loop, data: Encoded, objective, teacher_logits, evaluate, primary) -> str:
    """Run optimiser steps until epochs, max_steps or the time budget end; return which one."""
    acc, spec, state = loop.acc, loop.spec, loop.state
    lengths = data.lengths() if spec.group_by_length else None
    total, per_epoch = _total_steps(spec, len(data), acc.num_processes, lengths)
    budget_s = spec.budget_minutes * 60 if spec.budget_minutes else None
    bf16 = use_bf16(spec.precision)
    meter = _Meter()
    loop.model.train()
    with make_progress(acc.is_main_process) as bar:
        task = bar.add_task(loop.io.name, total=total, completed=state.step, loss=0.0, eps=0.0)
        while state.step < total:
            epoch, offset = divmod(state.step, per_epoch)
            for global_batch in epoch_batches(len(data), spec.batch_size, spec.seed, epoch, acc.num_processes, lengths)[offset:]:
                progress = state.step / total
                if budget_s:
                    progress = max(progress, state.elapsed / budget_s)
                t0 = time.perf_counter()
                loss = _step(loop, data, global_batch, objective, teacher_logits, lr_factor(progress, spec.warmup_ratio), bf16)
                meter.add(loss, len(global_batch), time.perf_counter() - t0)
                state.step += 1
                state.elapsed += _synced(acc, time.perf_counter() - t0)
                if loop.step_hook is not None:
                    done = state.step / total
                    loop.step_hook(max(done, state.elapsed / budget_s) if budget_s else done)
                if state.step % spec.log_every == 0 or state.step == total:
                    _log_train(loop, meter.pop(), bar, task, total, budget_s)
                t1 = time.perf_counter()
                if evaluate and spec.eval_every and state.step % spec.eval_every == 0:
                    _evaluate(loop, evaluate, primary)
                if spec.checkpoint_every and state.step % spec.checkpoint_every == 0:
                    _checkpoint(loop)  # the saved elapsed time covers every step before it
                state.elapsed += _synced(acc, time.perf_counter() - t1)
                if state.step >= total:
                    return "max_steps" if spec.max_steps and total == spec.max_steps else "epochs"
                if budget_s and state.elapsed >= budget_s:
                    return "budget"
    return "epochs"


@dataclass
class _Meter:
    """Running loss and training-only examples/s between two log lines."""

    loss: float = 0.0
    n: int = 0
    examples: int = 0
    seconds: float = 0.0

    def add(self, loss: float, examples: int, seconds: float) -> None:
        self.loss, self.n = self.loss + loss, self.n + 1
        self.examples, self.seconds = self.examples + examples, self.seconds + seconds

    def pop(self) -> tuple[float, float]:
        out = (self.loss / max(1, self.n), self.examples / max(1e-9, self.seconds))
        self.loss, self.n, self.examples, self.seconds = 0.0, 0, 0, 0.0
        return out


def _synced(acc: Accelerator, value: float) -> float:
    """Rank 0's value on every process (so budget decisions and LR agree across processes)."""
    if acc.num_processes == 1:
        return value
    return float(broadcast(torch.tensor([value], dtype=torch.float64), from_process=0)[0])


def _step(loop: _Loop, data: Encoded, global_batch: list[int], objective, teacher_logits, factor: float, bf16: bool) -> float:
    acc = loop.acc
    local = global_batch[acc.process_index :: acc.num_processes]
    batch = collate(data, local)
    for group in loop.opt.param_groups:
        group["lr"] = loop.spec.lr * factor
    inputs, labels = model_inputs(batch), batch["labels"]
    masked_lm = isinstance(objective, DistillObjective) and objective.masked_lm
    if isinstance(objective, SelfSupervised):  # masks (and pairs) its own batches, from the checkpointed RNG
        inputs, labels = objective.prepare_batch(batch)
    elif masked_lm:  # dynamic masking: a new draw per batch from the checkpointed RNG
        inputs, labels = objective.mask(inputs)
    t_feats = None
    t_logits = teacher_logits[batch["index"]] if teacher_logits is not None else None
    with autocast(bf16):
        if loop.teacher is not None and isinstance(objective, DistillObjective) and objective.needs_teacher_features:
            with torch.no_grad():
                if masked_lm:
                    t_feats = mlm_forward(loop.teacher, inputs, objective.wants, labels)
                else:
                    t_feats = forward_features(loop.teacher, inputs, objective.wants)
        loss = loop.model(inputs, labels, t_feats, t_logits)
    acc.backward(loss)
    if loop.spec.grad_clip > 0:
        acc.clip_grad_norm_(loop.model.parameters(), loop.spec.grad_clip)
    loop.opt.step()
    loop.opt.zero_grad(set_to_none=True)
    return float(loss.detach())


def _log_train(loop: _Loop, loss_eps: tuple[float, float], bar, task, total: int, budget_s: float | None) -> None:
    state = loop.state
    loss, eps = loss_eps
    lr = loop.opt.param_groups[0]["lr"]
    loop.log.write(event="train", step=state.step, loss=round(loss, 6), lr=lr,
                   examples_per_s=round(eps, 1), elapsed_s=round(state.elapsed, 2))
    expected = total
    if budget_s and state.elapsed > 0:
        expected = min(total, max(state.step, int(state.step * budget_s / state.elapsed)))
    bar.update(task, completed=state.step, total=expected, loss=loss, eps=eps)


def _evaluate(loop: _Loop, evaluate: EvalFn, primary: str | None) -> None:
    state = loop.state
    metrics = evaluate(loop.student)
    loop.model.train()
    entry = {"step": state.step, "elapsed_s": round(state.elapsed, 2), **metrics}
    state.history.append(entry)
    key = primary or next(iter(metrics), None)
    value = metrics.get(key) if key else None
    improved = value is not None and (state.best_metric is None or value > state.best_metric)
    if improved:
        state.best_metric, state.best_step = float(value), state.step
        if loop.spec.keep_best:
            loop.best = {k: v.detach().clone() for k, v in loop.unwrapped.state_dict().items()}
    loop.log.write(event="eval", step=state.step, metrics=metrics, best=improved)


def _checkpoint(loop: _Loop) -> None:
    acc = loop.acc
    rng = torch.get_rng_state()
    if acc.num_processes > 1:
        gathered = [torch.empty_like(rng) for _ in range(acc.num_processes)]
        torch.distributed.all_gather(gathered, rng)
        rngs = dict(enumerate(gathered))
    else:
        rngs = {0: rng}
    if acc.is_main_process:
        path = save_checkpoint(loop.io.checkpoint_dir, loop.unwrapped, loop.opt, loop.state, loop.best, rngs)
        loop.log.write(event="checkpoint", step=loop.state.step, path=path.name)
    acc.wait_for_everyone()
