"""`tinyplm predict` into streams (/dev/stdout behind a shell's redirection, /dev/null, /dev/fd/N), and
an output that would replace a file of the model in a Hugging Face cache."""

from __future__ import annotations

import os
import re
import shutil
import stat
import sys
from pathlib import Path

import pytest

import helpers_warm as warm
from helpers_cli import assert_bad_input, cli
from helpers_serve import make_sst2_run, sentences
from tinyplm.errors import TinyplmError
from tinyplm.predict.predict import writable
from tinyplm.predict.writers import is_stream


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    """A fake run dir (recipe with max_length 32, model/) beside a text file of 50 lines."""
    root = tmp_path_factory.mktemp("streams")
    make_sst2_run(root, n_dev=8)
    (root / "reviews.txt").write_text("\n".join(sentences(50)) + "\n", encoding="utf-8")
    return root


def test_the_processs_own_streams_are_streams_whatever_they_point_at(tmp_path: Path) -> None:
    """/dev/stdout was followed to its target: behind a shell's `>> all.jsonl` (a regular file) it was
    replaced atomically and what all.jsonl held was lost."""
    kept = tmp_path / "kept.jsonl"
    kept.write_text("old\n")
    fd = os.open(kept, os.O_WRONLY | os.O_APPEND)
    try:
        assert is_stream(f"/dev/fd/{fd}") and is_stream(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)
    assert is_stream("/dev/stdout") and is_stream("/dev/stderr") and not is_stream(kept)
    with pytest.raises(TinyplmError, match="--output /dev/fd/987: no such stream is open"):
        writable("/dev/fd/987", "--output")


def test_predictions_to_dev_stdout_are_appended_behind_a_shells_append(world: Path) -> None:
    """`tinyplm predict run -i reviews.txt -o /dev/stdout >> all.jsonl` keeps what all.jsonl held."""
    everything = world / "all.jsonl"
    everything.write_text('{"old": 1}\n', encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    with everything.open("ab") as fh:
        proc = warm.run([sys.executable, "-m", "tinyplm.cli", "predict", "run", "-i", "reviews.txt",
                         "-o", "/dev/stdout"], cwd=world, env=env, stdout=fh, stderr=-1, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = everything.read_text(encoding="utf-8").splitlines()
    assert lines[0] == '{"old": 1}' and len(lines) == 51 and '"label"' in lines[-1]
    assert not [p for p in world.iterdir() if p.name.startswith(".all.jsonl")]


def test_a_block_device_is_no_stream_to_write_predictions_into() -> None:
    """A disk counted as a stream: -o /dev/sda wrote the predictions over it (checked without writing)."""
    disks = [e.path for e in os.scandir("/dev") if stat.S_ISBLK(e.stat(follow_symlinks=False).st_mode)]
    if not disks:
        pytest.skip("no block device in /dev")
    assert not is_stream(disks[0])
    with pytest.raises(TinyplmError, match=f"--output {re.escape(disks[0])}: a block device"):
        writable(disks[0], "--output")


def _hub_snapshot(model: Path, hub: Path) -> Path:
    """``model`` laid out as the Hugging Face cache does: snapshots/REV/NAME -> ../../blobs/NAME.blob,
    plus an onnx/ subfolder."""
    snap, blobs = hub / "snapshots" / "rev1", hub / "blobs"
    snap.mkdir(parents=True)
    blobs.mkdir()
    for file in model.iterdir():
        shutil.copy(file, blobs / f"{file.name}.blob")
        (snap / file.name).symlink_to(Path("..", "..", "blobs", f"{file.name}.blob"))
    (snap / "onnx").mkdir()
    (snap / "onnx" / "model.onnx").write_bytes(b"onnx")
    return snap


def test_an_output_never_replaces_a_file_of_a_model_in_the_hub_cache_layout(world: Path, tmp_path: Path) -> None:
    """A snapshot's config.json links to ../../blobs/SHA: its resolved folder is blobs/, not the model
    dir, so -o SNAPSHOT/config.json overwrote the blob and destroyed the cached model."""
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(world / "run" / "config.resolved.yaml", run)
    snap = _hub_snapshot(world / "run" / "model", tmp_path / "hub")
    (run / "model").symlink_to(snap)
    blob = tmp_path / "hub" / "blobs" / "config.json.blob"
    before = blob.read_bytes()
    for args, said in ((["-o", snap / "config.json"], f"--output {snap / 'config.json'}: would replace config.json"),
                       (["-o", run / "model" / "config.json"], "would replace config.json of the model"),
                       (["-o", blob], f"--output {blob}: would replace config.json of the model"),
                       (["-o", snap / "onnx" / "model.onnx"], "would replace onnx/model.onnx of the model"),
                       (["-o", tmp_path / "ok.jsonl", "--skipped", snap / "config.json"],
                        "--skipped")):
        result = cli(["predict", run, "-i", world / "reviews.txt", *args], cwd=tmp_path)
        assert_bad_input(result, said, "write the predictions elsewhere")
    assert blob.read_bytes() == before and (snap / "onnx" / "model.onnx").read_bytes() == b"onnx"
    assert not (tmp_path / "ok.jsonl").exists()


def test_two_streams_are_not_the_same_file(world: Path, tmp_path: Path) -> None:
    """-o /dev/null --skipped /dev/null (and, on a terminal, /dev/stdout and /dev/stderr) were refused as
    one file; a stream that is a shell's redirection to the input still is."""
    (world / "bad.csv").write_text('text\n"a good film"\n"broken\n', encoding="utf-8")
    result = cli(["predict", "run", "-i", "bad.csv", "-o", "/dev/null", "--on-error", "skip",
                  "--skipped", "/dev/null"], cwd=world)
    assert result.returncode == 0, result.output
    fd = os.open(world / "reviews.txt", os.O_WRONLY | os.O_APPEND)
    try:
        result = cli(["predict", "run", "-i", "reviews.txt", "-o", f"/dev/fd/{fd}"], cwd=world)
    finally:
        os.close(fd)
    assert_bad_input(result, "the output would replace the input")
    assert len((world / "reviews.txt").read_text(encoding="utf-8").splitlines()) == 50
