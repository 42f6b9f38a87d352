"""Atomic training checkpoints: weights, optimiser, RNG and loop state.

A checkpoint is a directory ``step-000120/`` written under a temporary name and renamed when
complete, so a kill at any moment leaves either the old or the new checkpoint, never half of one.
Everything loads with safetensors or ``torch.load(weights_only=True)``.

Why not ``accelerate``'s ``save_state``/``load_state`` (under the same atomic rename)? We use
accelerate for devices and processes, but its checkpoints do not fit here: ``load_state`` loads
each process's RNG states inside a ``try`` that only logs "Could not load random states" at info
level when they fail, so a resumed run could silently mask and sample differently from an
uninterrupted one; our loop state (step, elapsed budget, eval history, best weights) would go in
through ``save_custom_state``, which ``load_state`` reads back with ``weights_only=False`` (pickle),
against our rule that loading never runs pickled code; and it writes into the folder it is given,
so the atomic rename would be ours anyway. The format below is five small files.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from tinyplm.errors import RunDirError

KEEP_LAST = 2


@dataclass
class LoopState:
    """Where a training stage is: enough to continue it exactly."""

    step: int = 0
    elapsed: float = 0.0
    best_metric: float | None = None
    best_step: int | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    losses: list[list[float]] = field(default_factory=list)  # [step, mean training loss] per log line


def _state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}


def save_checkpoint(
    ckpt_root: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    state: LoopState,
    best_weights: dict[str, torch.Tensor] | None,
    rank_rng: dict[int, torch.Tensor],
    extra: dict[str, dict[str, torch.Tensor]] | None = None,
) -> Path:
    """Write ``ckpt_root/step-XXXXXX`` atomically and prune old checkpoints. Returns its path.
    ``extra`` maps a name to more tensors kept with it (:func:`load_extra` reads them back).

    Every change to a ``step-*`` folder is a rename: one being replaced or pruned is renamed away
    before it is deleted, so a kill mid-delete never leaves half a checkpoint under a step name."""
    final = ckpt_root / f"step-{state.step:06d}"
    tmp = ckpt_root / f".tmp-step-{state.step:06d}"
    for stale in (*ckpt_root.glob(".tmp-step-*"), *ckpt_root.glob(".del-step-*")):  # left by a killed writer
        shutil.rmtree(stale, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file(_state_dict(model), str(tmp / "model.safetensors"))
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    torch.save({str(r): s for r, s in rank_rng.items()}, tmp / "rng.pt")
    if best_weights is not None:
        save_file(best_weights, str(tmp / "best.safetensors"))
    for name, tensors in (extra or {}).items():  # e.g. the weight average (train/weight_average.py)
        save_file(tensors, str(tmp / f"{name}.safetensors"))
    (tmp / "state.json").write_text(json.dumps(asdict(state)), encoding="utf-8")
    replaced = _set_aside(final) if final.exists() else None
    tmp.rename(final)
    if replaced is not None:
        shutil.rmtree(replaced, ignore_errors=True)
    for old in list_checkpoints(ckpt_root)[:-KEEP_LAST]:
        shutil.rmtree(_set_aside(old), ignore_errors=True)
    return final


def _set_aside(path: Path) -> Path:
    """Rename a checkpoint out of the ``step-*`` names (atomic) -> its new path, to delete."""
    aside = path.with_name(f".del-{path.name}")
    path.rename(aside)
    return aside


def list_checkpoints(ckpt_root: Path) -> list[Path]:
    """Complete checkpoints, oldest first."""
    if not ckpt_root.is_dir():
        return []
    return sorted(p for p in ckpt_root.glob("step-*") if (p / "state.json").is_file())


#: The files every checkpoint holds (``best.safetensors`` and extras are optional).
REQUIRED = ("model.safetensors", "optimizer.pt", "rng.pt", "state.json")


def checkpoint_damage(path: Path) -> str | None:
    """What is wrong with checkpoint ``path`` (a file missing or empty, a ``state.json`` that is not
    the loop's state, a safetensors file whose header does not read: a copy cut short, a disk
    that filled), found without loading its tensors; None when it looks whole."""
    for name in REQUIRED:
        file = path / name
        if not file.is_file() or file.stat().st_size == 0:
            return f"{file}: {'empty' if file.is_file() else 'missing'}"
    try:
        state = json.loads((path / "state.json").read_text(encoding="utf-8"))
        LoopState(**state)
    except (OSError, UnicodeDecodeError, ValueError, TypeError) as exc:
        return f"{path / 'state.json'}: not a training state ({exc})"
    for file in sorted(path.glob("*.safetensors")):
        try:
            with safe_open(str(file), framework="pt") as fh:
                fh.keys()
        except Exception as exc:  # noqa: BLE001  (safetensors raises its own error types, and OSError)
            return f"{file}: unreadable ({exc})"
    return None


def latest_whole(ckpt_root: Path) -> tuple[Path | None, list[str]]:
    """(the newest checkpoint under ``ckpt_root`` that :func:`checkpoint_damage` finds whole, the
    damage of each newer one passed over). Raises ``RunDirError`` when there are checkpoints and
    every one is damaged: training the stage again from nothing is the user's call, not ours."""
    passed: list[str] = []
    for path in reversed(list_checkpoints(ckpt_root)):
        damage = checkpoint_damage(path)
        if damage is None:
            return path, passed
        passed.append(damage)
    if passed:
        raise RunDirError(f"{ckpt_root}: every checkpoint is damaged ({'; '.join(passed)}); remove the folder "
                          "to train this stage again from its start")
    return None, passed


def load_checkpoint(path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer):
    """Restore weights and optimiser from ``path``.

    Returns (LoopState, best weights or None, {rank: rng state}).
    """
    model.load_state_dict(load_file(str(path / "model.safetensors")))
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=True))
    rng = {int(k): v for k, v in torch.load(path / "rng.pt", weights_only=True).items()}
    best_file = path / "best.safetensors"
    best = load_file(str(best_file)) if best_file.is_file() else None
    state = LoopState(**json.loads((path / "state.json").read_text(encoding="utf-8")))
    return state, best, rng


def load_extra(path: Path, name: str) -> dict[str, torch.Tensor] | None:
    """The tensors saved under ``name`` in checkpoint ``path`` (``save_checkpoint``'s ``extra``), or
    None when it has none (a checkpoint written before they were kept)."""
    file = path / f"{name}.safetensors"
    return load_file(str(file)) if file.is_file() else None
