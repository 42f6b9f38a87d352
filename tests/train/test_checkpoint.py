"""Checkpoints: a kill at any point of writing, replacing or pruning leaves only whole ones."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import tinyplm.train.checkpoint as checkpoint
from tinyplm.train.checkpoint import LoopState, list_checkpoints, load_checkpoint, save_checkpoint


def _save(root: Path, step: int) -> Path:
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters())
    return save_checkpoint(root, model, opt, LoopState(step=step), None, {0: torch.get_rng_state()})


def _whole(root: Path) -> list[str]:
    """Names of the checkpoints listed, after loading each one (raises on half of one)."""
    for path in list_checkpoints(root):
        model = torch.nn.Linear(3, 2)
        load_checkpoint(path, model, torch.optim.AdamW(model.parameters()))
    return [p.name for p in list_checkpoints(root)]


@pytest.mark.parametrize("step", [3, 2])  # pruning step-000001, replacing step-000002
def test_a_kill_while_deleting_a_checkpoint_leaves_only_whole_ones(tmp_path: Path, monkeypatch, step: int) -> None:
    _save(tmp_path, 1)
    _save(tmp_path, 2)
    real = checkpoint.shutil.rmtree

    def killed(path, *args, **kwargs):  # the process dies having deleted one file of the folder
        files = sorted(Path(path).iterdir())
        files[-1].unlink()
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint.shutil, "rmtree", killed)
    with pytest.raises(KeyboardInterrupt):
        _save(tmp_path, step)
    monkeypatch.setattr(checkpoint.shutil, "rmtree", real)
    assert _whole(tmp_path) == (["step-000002", "step-000003"] if step == 3 else ["step-000001", "step-000002"])
    _save(tmp_path, 4)  # the next save clears what the killed one left
    kept = ["step-000003", "step-000004"] if step == 3 else ["step-000002", "step-000004"]
    assert _whole(tmp_path) == kept
    assert sorted(p.name for p in tmp_path.iterdir()) == kept
