"""What the loop iterates over: epoch batches (seeded, optionally grouped by length), the number
of steps, and the learning-rate factor."""

from __future__ import annotations

import math

import numpy as np
import torch

from tinyplm.config.schema import TrainSpec
from tinyplm.errors import DataError

# Batches per length-sorted chunk when grouping by length (HF Trainer uses 50 too).
GROUP_CHUNK = 50


def epoch_batches(
    n: int, batch_size: int, seed: int, epoch: int, world: int = 1, lengths: np.ndarray | None = None
) -> list[list[int]]:
    """Global index batches of one epoch, deterministic in (seed, epoch).

    With ``lengths``, examples are grouped by length: a seeded permutation is cut into chunks
    of ``GROUP_CHUNK`` batches, each chunk is sorted by length and cut into batches, and the
    batch order is shuffled. Batches then hold similar lengths and pad little, so training runs
    faster (the figure measured on SST-2: docs/results/demo.md). A final batch smaller than
    ``world`` is dropped so every process gets at least one example.
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


def total_steps(spec: TrainSpec, n: int, world: int, lengths: np.ndarray | None) -> tuple[int, int]:
    """(steps the stage runs unless its time budget ends first, batches per epoch).

    Raises ``DataError`` when there is not one batch to train on."""
    per_epoch = len(epoch_batches(n, spec.batch_size, spec.seed, 0, world, lengths))
    if per_epoch == 0:
        raise DataError(f"no training batches: {n} training examples for {world} processes")
    total = math.ceil(spec.epochs * per_epoch)
    if spec.max_steps:
        total = min(total, spec.max_steps)
    return total, per_epoch
