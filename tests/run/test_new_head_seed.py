"""A head the teacher or an ``init_from`` student lacks (a masked-LM or bare encoder checkpoint: the
packaged MiniLM has none) starts from the stage's seed, so the same recipe gives the same run
whatever the process did before: it started from whatever the global generator held, and two runs of
one recipe fine-tuned different teachers."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

from conftest import TINY_TRAIN, make_tiny_glue, make_tiny_mlm_dir, tiny_recipe, write_recipe
from tinyplm.config import load_recipe
from tinyplm.run import run


def test_a_new_head_starts_from_the_seed_in_every_run(tmp_path: Path) -> None:
    mlm, glue = make_tiny_mlm_dir(tmp_path / "mlm"), make_tiny_glue(tmp_path / "glue", n_train=32, n_dev=16)
    student = {"name": "s", "init_from": str(mlm), "train": {**TINY_TRAIN, "max_steps": 1}}
    recipe = tiny_recipe(tmp_path, mlm, glue, students=[student])
    recipe["teacher"]["finetune"] = {**TINY_TRAIN, "max_steps": 1}
    saved = []
    for k, noise in enumerate((1, 2)):
        torch.manual_seed(noise)  # what ran before in this process: another state of the generator
        torch.rand(noise)
        run(load_recipe(write_recipe(tmp_path / f"r{k}.yaml", {**recipe, "output_dir": str(tmp_path / f"run{k}")})))
        folder = tmp_path / f"run{k}"
        saved.append({w: load_file(str(folder / w / "model.safetensors")) for w in ("teacher", "students/s")})
    for where in ("teacher", "students/s"):
        first, second = saved[0][where], saved[1][where]
        for name in ("classifier.weight", "bert.pooler.dense.weight"):
            torch.testing.assert_close(first[name], second[name], rtol=0, atol=0, msg=f"{where}: {name}")
