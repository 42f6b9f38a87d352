"""`tinyplm predict --ray`: shards in, shards out, the same records as plain `predict`, and a
killed actor changes nothing in the output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import helpers_warm as warm
from conftest import make_tiny_model_dir
from helpers_cli import cli
from helpers_serve import make_sst2_run, sentences
from tinyplm.cluster import cluster_cpus
from tinyplm.errors import DataError, TinyplmError
from tinyplm.predict.shards import (
    CLUSTER_WORKERS,
    MANIFEST,
    ShardJob,
    ShardOptions,
    check_shard_inputs,
    check_shard_job,
    list_shards,
    output_of,
    pool_shape,
    tinyplm_cause,
)

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    """A fake run dir beside tiny SST-2 dev (64 rows) cut into 8 TSV shards with their header."""
    root = tmp_path_factory.mktemp("predict_ray")
    glue = make_sst2_run(root, n_dev=64)
    rows = (glue / "SST-2" / "dev.tsv").read_text(encoding="utf-8").splitlines()
    (root / "shards").mkdir()
    for i in range(8):
        part = [rows[0], *rows[1 + 8 * i: 1 + 8 * (i + 1)]]
        (root / "shards" / f"part-{i}.tsv").write_text("\n".join(part) + "\n", encoding="utf-8")
    return root


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_pool_defaults_to_one_actor_with_every_cpu_on_this_machine() -> None:
    assert pool_shape(None, None, None) == (1, None)  # Ray on this machine: every CPU it has, read once up
    assert pool_shape(None, 2, None) == (1, 2.0)
    assert pool_shape(None, None, "10.0.0.1:6379") == (CLUSTER_WORKERS, 1.0)  # a cluster: as before
    assert pool_shape(3, None, None) == (3, 1.0)  # what the user says stands
    assert pool_shape(4, 2, "auto") == (4, 2.0)

    class Ray:  # what cluster_cpus reads of a connected ray module
        def __init__(self, resources: dict) -> None:
            self.resources = resources

        def cluster_resources(self) -> dict:
            return self.resources

    assert cluster_cpus(Ray({"CPU": 3.0, "memory": 1e9})) == 3.0
    assert cluster_cpus(Ray({})) == float(os.cpu_count() or 1)


def test_shards_are_listed_and_checked_before_ray_starts(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    for name in ("b.tsv", "a.tsv", ".hidden", "_manifest.json"):
        (tmp_path / "in" / name).write_text("x\n")
    assert [p.name for p in list_shards(str(tmp_path / "in"))] == ["a.tsv", "b.tsv"]
    assert [p.name for p in list_shards(str(tmp_path / "in" / "*.tsv"))] == ["a.tsv", "b.tsv"]
    with pytest.raises(TinyplmError, match="no file matches it"):
        list_shards(str(tmp_path / "in" / "*.csv"))
    (tmp_path / "in" / "a.csv").write_text("x\n")
    clash = ShardJob(tmp_path / "m", list_shards(str(tmp_path / "in" / "a.*")), tmp_path / "out")
    with pytest.raises(TinyplmError, match="a.csv and .*a.tsv would both write .*a.jsonl"):
        check_shard_job(clash)
    with pytest.raises(TinyplmError, match="holds the input shards"):
        check_shard_job(ShardJob(tmp_path / "m", [tmp_path / "in" / "a.tsv"], tmp_path / "in"))
    assert output_of(Path("x/part-3.tsv"), Path("o"), "csv") == Path("o/part-3.csv")


def test_ray_needs_an_output_folder(world: Path) -> None:
    result = cli(["predict", "run", "-i", "shards", "--ray"], cwd=world)
    assert result.returncode == 2 and "name the output folder with --output" in result.stderr


def test_what_an_actor_would_refuse_is_refused_before_ray_starts(world: Path, tmp_path: Path) -> None:
    """Column options a shard's format cannot honour, a shard the model's head cannot read, an output
    format it cannot write: refused by the CLI, naming the shard, before Ray (or the output folder)."""
    (tmp_path / "txt").mkdir()
    (tmp_path / "txt" / "a.txt").write_text("a good film\n", encoding="utf-8")
    (tmp_path / "json").mkdir()
    (tmp_path / "json" / "b.json").write_text('{"data": []}', encoding="utf-8")
    for shards, extra, said in (("txt", ["--text-column", "x"], "a.txt is read as text"),
                                ("json", [], "b.json: SQuAD JSON is for question-answering models")):
        out = tmp_path / f"out-{shards}"
        result = cli(["predict", "run", "-i", str(tmp_path / shards), "-o", str(out), "--ray", *extra], cwd=world)
        assert result.returncode == 2 and said in result.stderr, result.stderr
        assert "Traceback" not in result.output and not out.exists()


def test_options_and_rows_an_actor_would_refuse_are_refused_before_ray_starts(world: Path, tmp_path: Path) -> None:
    """Before, each of these started Ray (seconds of start-up) and ended in a Ray traceback from an actor
    (or, for --skipped, was silently ignored); now one line and exit 2, no output folder."""
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "p0.txt").write_text("a good film\nthe plot is dull\n", encoding="utf-8")
    (bad / "p1.txt").write_text("fun\n\nplot\n", encoding="utf-8")  # a blank line in the last shard
    shards = str(world / "shards")
    for extra, said in ((["--on-error", "ignore"], "--on-error: expected one of"),
                        (["--window", "0"], "--window: expected at least 1"),
                        (["--skipped", "s.jsonl", "--on-error", "skip"], "--skipped: with --ray each shard's")):
        out = tmp_path / "out"
        result = cli(["predict", "run", "-i", shards, "-o", str(out), "--ray", *extra], cwd=world)
        assert result.returncode == 2 and said in result.stderr, result.stderr
        assert "Traceback" not in result.output and not out.exists()
    job = ShardJob(world / "run", list_shards(str(bad)), tmp_path / "out")
    with pytest.raises(DataError, match=r"p1\.txt:2: empty text"):
        check_shard_inputs(job)
    one = make_tiny_model_dir(tmp_path / "one-segment")  # BERT's tokenizer, no row for the second segment
    config = json.loads((one / "config.json").read_text())
    (one / "config.json").write_text(json.dumps({**config, "type_vocab_size": 1}))
    paired = ShardJob(one, list_shards(shards), tmp_path / "out", ShardOptions(pair_column="label"))
    with pytest.raises(TinyplmError, match="type_vocab_size 1 has no row for segment id 1"):
        check_shard_inputs(paired)


def test_an_actors_own_error_is_found_inside_rays_wrapping() -> None:
    class RayTaskError(Exception):  # Ray's wrapper: the actor's exception under .cause
        def __init__(self, cause):
            super().__init__("ray")
            self.cause = cause

    ours = DataError("a.tsv, line 3: empty")
    wrapped = RayTaskError(RuntimeError("user code"))
    wrapped.cause.__cause__ = ours
    assert tinyplm_cause(wrapped) is ours
    assert tinyplm_cause(RayTaskError(ValueError("x"))) is None


def _actor_pids() -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and b"MapWorker" in (proc / "cmdline").read_bytes():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


@pytest.mark.slow
def test_shards_through_ray_equal_plain_predict_though_an_actor_is_killed(tmp_path: Path, world: Path) -> None:
    """One Ray job (each start of Ray costs more than the predictions): TSV shards with their header,
    one actor SIGKILLed mid-way; every output shard is plain predict on its input shard, record for
    record, each record with its line in its shard, nothing half-written left."""
    pytest.importorskip("ray", reason="the cluster extra (ray[data]) is not installed")
    (tmp_path / "in").mkdir()
    texts = sentences(12000)
    for i in range(8):
        rows = ["sentence\tlabel", *(f"{t}\t{k % 2}" for k, t in enumerate(texts[1500 * i: 1500 * (i + 1)]))]
        (tmp_path / "in" / f"part-{i}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "tinyplm", "predict", str(world / "run"), "-i", str(tmp_path / "in"), "-o",
           str(tmp_path / "out"), "--ray", "--workers", "2", "--window", "64"]
    proc = warm.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline, killed = time.monotonic() + 300, None
    while killed is None and time.monotonic() < deadline and proc.poll() is None:
        done = list((tmp_path / "out").glob("part-*.jsonl")) if (tmp_path / "out").is_dir() else []
        pids = _actor_pids()
        if done and pids:
            assert len(done) < 8, "the job finished before an actor could be killed: make the shards larger"
            killed = pids[0]
            os.kill(killed, signal.SIGKILL)
        time.sleep(0.05)
    stdout, stderr = proc.communicate(timeout=600)
    assert killed is not None, f"no actor was seen working: {stderr[-2000:]}"
    assert proc.returncode == 0, stderr[-3000:]
    assert stdout.strip().splitlines()[-1].endswith(MANIFEST)
    manifest = json.loads((tmp_path / "out" / MANIFEST).read_text())
    assert [Path(s["shard"]).name for s in manifest["shards"]] == [f"part-{i}.tsv" for i in range(8)]
    assert sum(s["predicted"] for s in manifest["shards"]) == 12000
    assert (manifest["workers"], manifest["threads_per_worker"]) == (2, 1.0)  # --workers without --threads
    for i in range(8):
        assert [r["line"] for r in _records(tmp_path / "out" / f"part-{i}.jsonl")] == list(range(2, 1502))
    for i in (0, 5, 7):  # plain predict on an input shard writes its output shard, record for record
        plain = cli(["predict", "run", "-i", str(tmp_path / "in" / f"part-{i}.tsv"), "-o",
                     str(tmp_path / f"p{i}.jsonl"), "--window", "64"], cwd=world)
        assert plain.returncode == 0, plain.stderr
        assert _records(tmp_path / f"p{i}.jsonl") == _records(tmp_path / "out" / f"part-{i}.jsonl")
    assert not list((tmp_path / "out").glob("*.tmp")) and not list((tmp_path / "out").glob(".*"))
