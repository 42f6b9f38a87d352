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
    n: int, batch_size: int, seed: int, epoch: int, world: int = 1, lengths: np.ndarray | None = None,
    groups: np.ndarray | None = None,
) -> list[list[int]]:
    """Global index batches of one epoch, deterministic in (seed, epoch).

    With ``lengths``, examples are grouped by length: a seeded permutation is cut into chunks
    of ``GROUP_CHUNK`` batches, each chunk is sorted by length and cut into batches, and the
    batch order is shuffled. Batches then hold similar lengths and pad little, so training runs
    faster (the figure measured on SST-2: docs/results/demo.md). A final batch smaller than
    ``world`` is dropped so every process gets at least one example.

    With ``groups`` (``(n,)`` ids), the examples sharing an id are a unit that goes into one batch
    (:func:`_unit_batches`): an embedding task's question and the passage it was made from, so
    the in-batch similarity term compares them.
    """
    gen = torch.Generator().manual_seed(seed * 1000 + epoch)
    if groups is not None:
        if len(groups) != n:
            raise ValueError(f"groups has {len(groups)} ids for {n} examples")
        return [b for b in _unit_batches(groups, batch_size, gen, lengths) if len(b) >= world]
    # Single examples are batched by slicing, not as units of one: the same batches (checked in
    # tests/train/test_loop.py), and several times faster on a corpus of 10^5-10^6 examples.
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


def _unit_batches(groups: np.ndarray, batch_size: int, gen: torch.Generator,
                  lengths: np.ndarray | None) -> list[list[int]]:
    """Batches of whole units (the examples sharing a ``groups`` id, in index order; a unit of more
    than ``batch_size`` examples is cut into batches of its own): units in a seeded order, filled
    into batches of at most ``batch_size`` examples in turn. With ``lengths``, as for single
    examples: chunks of ``GROUP_CHUNK`` batches' worth of units, each sorted by its longest
    member, and the batches shuffled."""
    members: dict[int, list[int]] = {}
    for i, g in enumerate(groups.tolist()):
        members.setdefault(int(g), []).append(i)
    units = [u[k : k + batch_size] for u in members.values() for k in range(0, len(u), batch_size)]
    order = [units[i] for i in torch.randperm(len(units), generator=gen).tolist()]
    chunks = [order]
    if lengths is not None:
        chunks, chunk, size = [], [], 0
        for unit in order:
            chunk.append(unit)
            size += len(unit)
            if size >= batch_size * GROUP_CHUNK:
                chunks.append(chunk)
                chunk, size = [], 0
        chunks += [chunk] if chunk else []
        chunks = [sorted(c, key=lambda u: (max(int(lengths[i]) for i in u), u[0])) for c in chunks]
    batches: list[list[int]] = []
    for chunk in chunks:
        batch: list[int] = []
        for unit in chunk:
            if len(batch) + len(unit) > batch_size:
                batches.append(batch)
                batch = []
            batch += unit
        batches += [batch] if batch else []
    if lengths is not None:
        batches = [batches[i] for i in torch.randperm(len(batches), generator=gen).tolist()]
    return batches


def lr_factor(progress: float, warmup: float) -> float:
    """Linear warm-up over the first ``warmup`` fraction, then linear decay to 0 at progress 1."""
    progress = min(max(progress, 0.0), 1.0)
    if warmup > 0 and progress < warmup:
        return progress / warmup
    return max(0.0, (1.0 - progress) / max(1e-9, 1.0 - warmup))


def total_steps(spec: TrainSpec, n: int, world: int, lengths: np.ndarray | None,
                groups: np.ndarray | None = None) -> tuple[int, int]:
    """(steps the stage runs unless its time budget ends first, batches per epoch).

    Raises ``DataError`` when there is not one batch to train on."""
    per_epoch = len(epoch_batches(n, spec.batch_size, spec.seed, 0, world, lengths, groups))
    if per_epoch == 0:
        raise DataError(f"no training batches: {n} training examples for {world} processes")
    total = math.ceil(spec.epochs * per_epoch)
    if spec.max_steps:
        total = min(total, spec.max_steps)
    return total, per_epoch
