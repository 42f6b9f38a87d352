"""files.py: atomic writes, the run-dir lock (live holders refused by name, stale locks taken over
on --resume) and the one rule for reusing finished runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tinyplm.config.changes import resume_blockers
from tinyplm.errors import RunDirError
from tinyplm.files import (
    LOCK,
    RESOLVED,
    Holder,
    atomic_open,
    claim_run_dir,
    lock_state,
    reuse_finished,
    write_atomic,
)

HOLD = """
import sys, time
from tinyplm.files import claim_run_dir
claim = claim_run_dir(sys.argv[1], "recipe: a\\n", resume=True)
print("claimed", flush=True)
time.sleep(120)
"""


def _holder(run_dir: Path) -> subprocess.Popen:
    """A separate process that claims ``run_dir`` and keeps it until killed."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "claimed"
    return proc


def test_write_atomic_replaces_whole_files_and_leaves_no_temporaries(tmp_path: Path) -> None:
    path = write_atomic(tmp_path / "sub" / "a.txt", "first")
    write_atomic(path, b"second")
    assert path.read_bytes() == b"second"
    assert sorted(p.name for p in path.parent.iterdir()) == ["a.txt"]


def test_a_failed_streaming_write_keeps_the_old_file(tmp_path: Path) -> None:
    path = write_atomic(tmp_path / "out.jsonl", "old\n")
    with pytest.raises(RuntimeError), atomic_open(path) as fh:
        fh.write("half a new fi")
        raise RuntimeError("the writer failed")
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]


def test_a_new_run_dir_is_claimed_locked_and_released(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with claim_run_dir(run_dir, "recipe: a\n") as claim:
        assert not claim.resumed and (run_dir / RESOLVED).read_text() == "recipe: a\n"
        live, holder = lock_state(run_dir)
        assert live and holder.pid == os.getpid()
    assert lock_state(run_dir)[0] is False  # released


def test_a_live_holder_is_refused_by_name(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = _holder(run_dir)
    try:
        for kwargs in ({}, {"resume": True}, {"force": True}):
            with pytest.raises(RunDirError, match=rf"in use by pid {proc.pid} on \S+ since .*; wait") as err:
                claim_run_dir(run_dir, "recipe: a\n", **kwargs)
            assert "--resume" not in str(err.value)  # not while the first one is still running
        assert (run_dir / RESOLVED).read_text() == "recipe: a\n"  # nothing was touched
    finally:
        proc.kill()
        proc.wait()


def test_a_stale_lock_is_named_then_taken_over_on_resume(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = _holder(run_dir)
    dead = proc.pid
    os.kill(dead, signal.SIGKILL)
    proc.wait()
    assert Holder.read(run_dir / LOCK).pid == dead
    with pytest.raises(RunDirError, match=rf"pass --resume .*pid {dead} .* is no longer running"):
        claim_run_dir(run_dir, "recipe: a\n")
    with pytest.raises(RunDirError, match="recipe changed"):
        claim_run_dir(run_dir, "recipe: b\n", resume=True)
    with claim_run_dir(run_dir, "recipe: a\n", resume=True) as claim:
        assert claim.resumed
        assert Holder.read(run_dir / LOCK).pid == os.getpid()


def test_force_replaces_a_run_but_never_a_foreign_dir(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    claim_run_dir(run_dir, "recipe: a\n").release()
    (run_dir / "results.json").write_text("{}")
    with pytest.raises(RunDirError, match="finished run"):
        claim_run_dir(run_dir, "recipe: a\n")
    with claim_run_dir(run_dir, "recipe: b\n", force=True):
        assert not (run_dir / "results.json").exists() and (run_dir / RESOLVED).read_text() == "recipe: b\n"
    foreign = tmp_path / "thesis"
    foreign.mkdir()
    (foreign / "chapter1.tex").write_text("precious")
    with pytest.raises(RunDirError, match="refusing to delete it"):
        claim_run_dir(foreign, "recipe: a\n", force=True)
    assert sorted(p.name for p in foreign.iterdir()) == ["chapter1.tex"]
    (foreign / "results.json").write_text('{"accuracy": 0.9}')  # a results.json alone makes no run dir
    for force in (True, False):
        with pytest.raises(RunDirError, match="not a tinyplm run directory"):
            claim_run_dir(foreign, "recipe: a\n", force=force)
    assert sorted(p.name for p in foreign.iterdir()) == ["chapter1.tex", "results.json"]


def test_a_claim_killed_before_its_recipe_was_written_starts_afresh_with_or_without_resume(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / LOCK).write_text('{"pid": 1, "host": "h", "since": "s"}\n')  # its lock, then the kill
    (run_dir / f".{RESOLVED}.123.tmp").write_text("recipe: ")  # killed while writing the recipe
    for resume in (True, False):
        with claim_run_dir(run_dir, "recipe: a\n", resume=resume) as claim:
            assert not claim.resumed and (run_dir / RESOLVED).read_text() == "recipe: a\n"
            assert sorted(p.name for p in run_dir.iterdir()) == sorted([LOCK, RESOLVED, "checkpoints", "logs"])
        (run_dir / RESOLVED).unlink()
        for sub in ("checkpoints", "logs"):
            (run_dir / sub).rmdir()


def test_a_run_killed_right_after_its_recipe_was_written_resumes(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_atomic(run_dir / RESOLVED, "recipe: a\n")  # killed before logs/ and checkpoints/ were made
    with claim_run_dir(run_dir, "recipe: a\n", resume=True) as claim:
        assert claim.resumed and (run_dir / "logs").is_dir() and (run_dir / "checkpoints").is_dir()


def test_a_resume_removes_what_killed_writers_left_half_written(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    write_atomic(run_dir / RESOLVED, "recipe: a\n")
    (run_dir / "plots").mkdir()
    student = run_dir / "students" / "s"
    left = [run_dir / "plots" / ".accuracy_vs_latency.png.29591.tmp", student / "model.onnx.4242.tmp"]
    kept = [run_dir / "plots" / "accuracy_vs_latency.png", run_dir / "notes.tmp", student / "a.1.tmp.json"]
    for path in left + kept:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x", encoding="utf-8")
    with claim_run_dir(run_dir, "recipe: a\n", resume=True) as claim:
        assert claim.resumed
    assert not any(p.exists() for p in left) and all(p.exists() for p in kept)


def test_reuse_finished_needs_the_same_recipe(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    assert reuse_finished(run_dir, "recipe: a\n") is False  # nothing there
    claim_run_dir(run_dir, "recipe: a\n").release()
    assert reuse_finished(run_dir, "recipe: a\n") is False  # unfinished: resume it
    (run_dir / "results.json").write_text("{}")
    assert reuse_finished(run_dir, "recipe: a\n") is True
    with pytest.raises(RunDirError, match="finished run of another recipe"):
        reuse_finished(run_dir, "recipe: b\n")


def test_holder_describes_itself() -> None:
    me = Holder.current()
    assert me.pid == os.getpid() and str(os.getpid()) in me.describe()
    assert time.strftime("%Y-") in me.since


def test_replace_dir_swaps_in_the_staged_folder_and_clears_a_stale_old_copy(tmp_path: Path) -> None:
    from tinyplm.files import replace_dir

    path, staged = tmp_path / "model", tmp_path / "model.tmp"
    path.mkdir()
    (path / "a").write_text("old")
    stale = tmp_path / "model.old"  # left by a replace killed between its renames
    stale.mkdir()
    (stale / "a").write_text("older")
    staged.mkdir()
    (staged / "a").write_text("new")
    assert replace_dir(staged, path) == path
    assert (path / "a").read_text() == "new" and not staged.exists() and not stale.exists()
    fresh = tmp_path / "fresh.tmp"  # nothing there yet: the staged folder simply takes the name
    fresh.mkdir()
    assert replace_dir(fresh, tmp_path / "fresh").is_dir() and not fresh.exists()


def test_a_run_dir_that_cannot_be_made_is_refused_in_one_line(tmp_path: Path) -> None:
    """A run dir that is a file, or under a file, or in a folder this user cannot write: a
    RunDirError naming the path, before anything is made (it was a NotADirectoryError traceback)."""
    from tinyplm.files import check_creatable, claim_run_dir

    a_file = tmp_path / "afile"
    a_file.write_text("x", encoding="utf-8")
    with pytest.raises(RunDirError, match="afile: is a file; the run directory must be a folder"):
        claim_run_dir(a_file, "recipe: 1\n")
    with pytest.raises(RunDirError, match=r"afile: is a file, so the run directory .*afile/run/x cannot be made"):
        claim_run_dir(a_file / "run" / "x", "recipe: 1\n")
    check_creatable(tmp_path / "new" / "run")  # folders that do not exist yet are made by the claim
    assert not (tmp_path / "new").exists()
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(RunDirError, match="locked: nothing can be made in this folder, where the run"):
            check_creatable(locked / "run")
    if Path("/proc/self").is_dir():  # a virtual file system: os.access says writable to root, mkdir fails
        with pytest.raises(RunDirError, match=r"--out: /proc: nothing can be made in this folder, where the table"):
            check_creatable(Path("/proc/gt/run"), "table folder", flag="--out")


def test_validate_refuses_an_output_dir_under_a_file(tmp_path: Path) -> None:
    from conftest import make_tiny_glue, make_tiny_model_dir, tiny_recipe, write_recipe
    from helpers_cli import assert_bad_input, cli

    (tmp_path / "afile").write_text("x", encoding="utf-8")
    recipe = tiny_recipe(tmp_path, make_tiny_model_dir(tmp_path / "m"), make_tiny_glue(tmp_path / "glue", 8, 8))
    recipe["output_dir"] = str(tmp_path / "afile" / "run")
    assert_bad_input(cli(["validate", str(write_recipe(tmp_path / "r.yaml", recipe))], cwd=tmp_path),
                     f"{tmp_path / 'afile'}: is a file, so the run directory")


def test_a_changed_recipe_is_named_key_by_key_and_a_moved_output_dir_resumes(tmp_path: Path) -> None:
    """--resume with another recipe said only "the recipe changed" (which key?) and offered --force,
    which deletes the stages made; a run folder moved, its recipe's output_dir edited to match, was
    refused though no stage reads output_dir."""
    run_dir = tmp_path / "run"
    stored = "output_dir: runs/old\nmeasure:\n  rounds: 1\nstudents:\n- name: s\n  lr: 0.1\n"
    claim_run_dir(run_dir, stored).release()
    edited = stored.replace("rounds: 1", "rounds: 2").replace("lr: 0.1", "lr: 0.2")
    with pytest.raises(RunDirError, match=r"changed since this run started \(measure\.rounds: 1 -> 2; "
                                          r"students\.0\.lr: 0\.1 -> 0\.2\); --resume needs the same recipe"):
        claim_run_dir(run_dir, edited, resume=True, compare=resume_blockers)
    with claim_run_dir(run_dir, stored.replace("runs/old", "runs/new"), resume=True, compare=resume_blockers) as claim:
        assert claim.resumed and (run_dir / RESOLVED).read_text() == stored


def test_what_no_stage_reads_may_change_on_resume() -> None:
    """finetune/distill name the run after --out: a run folder moved and resumed with the new --out
    was refused over its name; the logits cache's place changes no stage either."""
    old = "name: rte-teacher\noutput_dir: runs/rte-teacher\ncache_dir: a\ntask:\n  name: rte\n"
    new = old.replace("rte-teacher", "rte-t2").replace("cache_dir: a", "cache_dir: b")
    assert resume_blockers(old, new) == []
    assert resume_blockers(old, new.replace("name: rte\n", "name: mrpc\n")) == ["task.name: rte -> mrpc"]


def test_an_atomic_write_never_replaces_a_pipe_or_device(tmp_path: Path) -> None:
    """The rename put a regular file in place of a FIFO (or /dev/stdout: for every process after);
    it is refused, and the pipe is left as it was."""
    from tinyplm.errors import TinyplmError
    from tinyplm.files import write_atomic

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(TinyplmError, match="not a file"):
        write_atomic(fifo, "x")
    assert fifo.is_fifo() and [p.name for p in tmp_path.iterdir()] == ["pipe"]


def test_the_write_probe_is_named_afresh_each_time_and_leaves_nothing(tmp_path: Path, monkeypatch) -> None:
    """Named by the pid alone, two processes of one pid on two machines of a cluster probing a shared
    folder at once collided, and one was told nothing can be made there."""
    from tinyplm.files import write_problem

    made = []
    real = Path.mkdir
    monkeypatch.setattr(Path, "mkdir", lambda self, *a, **k: made.append(self.name) or real(self, *a, **k))
    assert write_problem(tmp_path) is None and write_problem(tmp_path) is None
    assert len(set(made)) == 2 and list(tmp_path.iterdir()) == []
