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


@pytest.mark.parametrize("damage", ["no weights", "cut weights", "cut state", "empty optimiser"])
def test_a_damaged_newest_checkpoint_is_passed_over_for_the_one_before(tmp_path: Path, damage: str) -> None:
    """A run folder copied in part, or a disk that filled: resuming raised a raw JSONDecodeError or
    FileNotFoundError, after the stages before it had been reloaded. Now the newest whole
    checkpoint is used and each one passed over is named; with none whole the folder is named."""
    from tinyplm.errors import RunDirError
    from tinyplm.train.checkpoint import checkpoint_damage, latest_whole

    older, newest = _save(tmp_path, 1), _save(tmp_path, 2)
    file = {"no weights": "model.safetensors", "cut weights": "model.safetensors", "cut state": "state.json",
            "empty optimiser": "optimizer.pt"}[damage]
    target = newest / file
    if damage == "no weights":
        target.unlink()
    elif damage == "empty optimiser":
        target.write_bytes(b"")
    else:
        target.write_bytes(target.read_bytes()[: len(target.read_bytes()) // 2])
    assert checkpoint_damage(older) is None and str(target) in checkpoint_damage(newest)
    path, passed = latest_whole(tmp_path)
    assert path == older and len(passed) == 1 and str(target) in passed[0]
    (older / "state.json").write_text('{"step": 1')
    with pytest.raises(RunDirError, match="every checkpoint is damaged .*remove the folder"):
        latest_whole(tmp_path)
    assert latest_whole(tmp_path / "none") == (None, [])
