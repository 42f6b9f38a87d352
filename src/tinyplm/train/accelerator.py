"""The process-wide ``accelerate.Accelerator``: device and process count are parameters of the
one loop, not copies of it."""

from __future__ import annotations

import torch
from accelerate import Accelerator
from accelerate.utils import DistributedDataParallelKwargs, broadcast

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


def release(acc: Accelerator) -> None:
    """Drop ``acc``'s references to a finished stage's model, optimiser, scheduler and data loaders,
    and reset its step count: what ``Accelerator.free_memory`` does, less the full garbage collection
    it ends with. Deliberately not that method: a stage's optimiser state is freed by its last
    reference going (tests/train/test_loop.py checks it with the collector off), there is no device
    cache on a CPU, and a full collection costs time in proportion to every object the process
    holds, at each stage's end (in the test suite's workers about as long as a tiny stage trains:
    docs/results/code-choices.md, "The test suite"). The attributes are accelerate's own (1.x)."""
    acc._schedulers, acc._optimizers, acc._models, acc._dataloaders = [], [], [], []
    acc.step = 0


def synced(acc: Accelerator, *values: float) -> list[float]:
    """Rank 0's values on every process (so budget, LR and stop decisions agree across processes)."""
    if acc.num_processes == 1:
        return list(values)
    tensor = broadcast(torch.tensor(values, dtype=torch.float64), from_process=0)
    return [float(v) for v in tensor]
