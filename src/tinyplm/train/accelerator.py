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


def synced(acc: Accelerator, *values: float) -> list[float]:
    """Rank 0's values on every process (so budget, LR and stop decisions agree across processes)."""
    if acc.num_processes == 1:
        return list(values)
    tensor = broadcast(torch.tensor(values, dtype=torch.float64), from_process=0)
    return [float(v) for v in tensor]
