"""A resumed run's data must be the data its checkpoints were trained on: the files a run reads are
fingerprinted when it starts, and --resume refuses, naming the file, when one has changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import make_tiny_glue, make_tiny_model_dir, tiny_recipe
from tinyplm.config import validate_recipe
from tinyplm.config.load import dump_resolved
from tinyplm.errors import RunDirError
from tinyplm.files import claim_run_dir
from tinyplm.run import run
from tinyplm.run.input_files import INPUTS_FILE, check_same_inputs, fingerprint, fingerprints


def test_fingerprints_follow_the_bytes_not_the_copy(tmp_path: Path) -> None:
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_bytes(b"text,label\nx,1\n")
    b.write_bytes(a.read_bytes())
    assert fingerprint(a) == fingerprint(b)
    b.write_bytes(b"text,label\nx,0\n")  # one byte flipped, same size
    assert fingerprint(a)["bytes"] == fingerprint(b)["bytes"] and fingerprint(a) != fingerprint(b)
    assert list(fingerprints({"train": a, "eval dev": tmp_path / "absent.csv", "corpus 0": tmp_path})) == ["train"]


def test_a_resume_compares_and_a_fresh_start_records(tmp_path: Path) -> None:
    data = tmp_path / "train.csv"
    data.write_text("text,label\nx,1\n", encoding="utf-8")
    check_same_inputs(tmp_path, {"train": data}, resumed=False)
    assert json.loads((tmp_path / INPUTS_FILE).read_text()) == {"train": {"path": str(data.resolve()),
                                                                          **fingerprint(data)}}
    check_same_inputs(tmp_path, {"train": data}, resumed=True)  # unchanged: nothing to say
    moved = tmp_path / "moved" / "train.csv"
    moved.parent.mkdir()
    moved.write_bytes(data.read_bytes())
    check_same_inputs(tmp_path, {"train": moved}, resumed=True)  # the same bytes elsewhere: the same data
    data.write_text("text,label\nx,0\ny,1\n", encoding="utf-8")
    with pytest.raises(RunDirError, match=r"train .*train\.csv \(15 bytes then, 19 now\).*--force"):
        check_same_inputs(tmp_path, {"train": data}, resumed=True)
    check_same_inputs(tmp_path, {"train": data}, resumed=False)  # --force starts again: recorded anew
    check_same_inputs(tmp_path, {"train": data}, resumed=True)
    (tmp_path / INPUTS_FILE).write_text("[1]", encoding="utf-8")
    with pytest.raises(RunDirError, match=rf"{INPUTS_FILE}: expected an object of data files"):
        check_same_inputs(tmp_path, {"train": data}, resumed=True)


def test_resume_refuses_a_run_whose_train_file_was_replaced(tmp_path: Path) -> None:
    """An unfinished run dir of the recipe, then its train.tsv rewritten with other labels:
    ``run(resume=True)`` refuses naming the file before the teacher trains a step."""
    glue = make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8)
    cfg = validate_recipe(tiny_recipe(tmp_path, make_tiny_model_dir(tmp_path / "m"), glue), source="test")
    run_dir = Path(cfg.output_dir)
    claim = claim_run_dir(run_dir, dump_resolved(cfg))
    train = glue / "SST-2" / "train.tsv"
    check_same_inputs(run_dir, {"train": train, "eval dev": glue / "SST-2" / "dev.tsv"}, resumed=False)
    claim.release()
    lines = train.read_text(encoding="utf-8").splitlines()
    train.write_text("\n".join([lines[0], *(f"{line[:-1]}{1 - int(line[-1])}" for line in lines[1:])]) + "\n",
                     encoding="utf-8")
    with pytest.raises(RunDirError, match=rf"train {train.resolve()} \(other bytes\)"):
        run(cfg, resume=True)
    assert not (run_dir / "teacher").exists()
