"""SIGKILL a multi-stage run at 10 random moments, resuming each time: it ends with the weights and
results.json of an uninterrupted run.

The recipe has every kind of stage a run writes: a teacher fine-tuned, a student distilled from it,
two compress steps with KD recovery (FFN then head pruning), an ONNX Runtime int8 export, then
measurement, the final-model copy and the reports.

How the moments are drawn: the straight run is timed first. Its timeline starts at the claim of its
run dir (the recipe written); the launch came ``C`` seconds before it (mostly imports), and every
log line and every output file it wrote is a landmark at the time it was written. Ten moments are
drawn with a seeded RNG, uniformly from ``LEAD`` seconds before the claim to the writing of
report.html, and sorted (a seed always draws the same fractions of that span; their seconds follow
the straight run's own timing on the machine at hand). Launch k is killed at moment k: a moment
before the claim at that time from the launch (``C`` less; at the launch's claim if it gets there
sooner); a moment after it once the launch has claimed the run dir and the run has reached the last
landmark before the moment, as long after as the straight run took from that landmark to the moment
(when this launch is first seen past it, at a later landmark: a checkpoint saved just before a kill
is resumed from and no launch logs it again, as long after as the straight run took from the later
one, or at once when that one came after the moment). So kills land at random instants between
landmarks: in the start-up, in training steps, evaluations and checkpoint writes, in model saves,
in the ONNX export, while measuring and while the reports are written; and a resumed launch, which
first reloads what is done, is killed as far into the run as the straight one was at that moment,
whatever the load on the machine. The first launch has no ``--resume``; every later one has; the
eleventh runs to the end.

Set ``TINYPLM_KILL_SEED`` to draw other moments (the default seed is the one the suite runs).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import helpers_warm as warm
from conftest import TINY_TRAIN, make_tiny_glue, make_tiny_model_dir, tiny_recipe, write_recipe

pytestmark = pytest.mark.slow

SEED = int(os.environ.get("TINYPLM_KILL_SEED", "41"))
KILLS = 10
LEAD = 1.5  # seconds before the claim a kill may fall (start-up, preflight, claiming the run dir)
LAST = "report.html"  # the latest landmark a moment may fall at: after it, only the cards and results.json

#: results.json keys whose values are measurements of this machine at one moment, not outcomes of
#: the run: they differ between two straight runs too, so they are the only keys not compared.
MEASURED = {
    "latency_ms_p50_b1": "speed, timed on this machine",
    "latency_ms_p90_b1": "speed, timed on this machine",
    "throughput_sent_per_s": "speed, timed on this machine",
    "compute": "GFLOP/s and share of peak: the measured throughput over the model's FLOPs",
    "train_seconds": "wall time of a training stage",
    "step_seconds": "wall time of a compress step",
    "elapsed_s": "wall time into training at each dev evaluation",
    "seconds": "wall time of the whole run",
    "created": "the run's start, a timestamp",
    "started_unix": "the run's start, a timestamp",
    "peak_rss_mib": "resident memory of the process, which after a resume held other things",
    "run_dir": "the run's own path: the two runs are in two folders",
}
#: keys only a resumed run has: they mark what it reloaded instead of running, not an outcome
RESUMED_ONLY = {"reused"}
#: files of model dirs not compared byte for byte: the model card shows the measured speed
MODEL_CARD = "README.md"


def _recipe(tmp: Path, model: Path, glue: Path, cache: Path) -> dict:
    every = {**TINY_TRAIN, "eval_every": 16, "checkpoint_every": 10, "log_every": 5}
    recover = {"objective": {"kd_weight": 1.0, "temperature": 2.0}, "train": {**every, "epochs": 1}}
    student = {
        "name": "s", "teacher_layers": [1],
        "objective": {"temperature": 2.0, "kd_weight": 1.0, "hard_weight": 0.5},
        "train": {**every, "epochs": 3},
        "compress": [
            {"kind": "prune_ffn", "keep": 0.5, "scope": "layer", "recover": recover},
            {"kind": "prune_heads", "keep": 0.5, "recover": recover},
            {"kind": "onnx_dynamic_int8"},
        ],
    }
    recipe = tiny_recipe(tmp, model, glue, students=[student], cache_dir=str(cache),
                         final={"rule": "smallest", "min_retention": 0.01})
    recipe["teacher"]["finetune"] = {**every, "epochs": 3}
    return recipe


def _cmd(recipe: Path, run_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "tinyplm.cli", "run", str(recipe), "--run-dir", str(run_dir), *extra]


def _claimed_by(run_dir: Path, pid: int) -> bool:
    try:
        return json.loads((run_dir / ".lock").read_text(encoding="utf-8"))["pid"] == pid
    except (OSError, ValueError, KeyError):
        return False


def _wait(proc: subprocess.Popen, until, deadline: float) -> bool:
    """Poll until ``until()`` holds (True) or ``proc`` ends or the deadline passes (False)."""
    while proc.poll() is None and time.monotonic() < deadline:
        if until():
            return True
        time.sleep(0.01)
    return False


@dataclass
class Timeline:
    """The straight run: seconds from its launch to its claim, and its landmarks in seconds from
    the claim: (time, ``log:STAGE:EVENT:STEP`` for each log line or ``file:PATH`` for each output)."""

    claim_s: float
    landmarks: list[tuple[float, str]]

    def at(self, name: str) -> float:
        return next(t for t, key in self.landmarks if key == name)

    def before(self, moment: float) -> tuple[float, str]:
        """The last landmark at or before ``moment`` (the claim itself when there is none)."""
        return max(((t, key) for t, key in self.landmarks if t <= moment), default=(0.0, "claim"))


def _log_key(line: str) -> str:
    e = json.loads(line)
    return f"log:{e['stage']}:{e['event']}:{e.get('step')}"


def _straight(cmd: list[str], env: dict, run_dir: Path, err: Path) -> Timeline:
    """Run to the end, timing the launch to the claim; its landmarks are read from its files."""
    t0 = time.monotonic()
    with err.open("w") as fh:
        proc = warm.popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=fh)
    _wait(proc, lambda: _claimed_by(run_dir, proc.pid), t0 + 300)
    claim_s = time.monotonic() - t0
    assert proc.wait(timeout=600) == 0, err.read_text()[-3000:]
    claimed = (run_dir / "config.resolved.yaml").stat().st_mtime
    marks: dict[str, float] = {}
    for line in (run_dir / "logs" / "train.jsonl").read_text(encoding="utf-8").splitlines():
        marks.setdefault(_log_key(line), json.loads(line)["time"] - claimed)
    for rel in _outputs(run_dir):  # not model/: a copy, with its source's times
        if (run_dir / rel).is_file() and not rel.startswith("model/"):
            marks[f"file:{rel}"] = (run_dir / rel).stat().st_mtime - claimed
    return Timeline(claim_s, sorted((t, key) for key, t in marks.items()))


class Progress:
    """Which landmarks the killed run has reached (read incrementally from its log and files).

    A landmark is reached when any launch logged it, or when the launch at hand logged one that
    came later in the straight run: a launch killed between saving a checkpoint and logging it
    leaves a checkpoint the next launch resumes from without ever logging it."""

    def __init__(self, run_dir: Path, line: Timeline) -> None:
        self.run_dir, self._seen, self._offset = run_dir, set(), 0
        self._order = {key: t for t, key in line.landmarks}
        self._latest = float("-inf")  # the straight-run time of the latest landmark this launch logged

    def launch(self) -> None:
        """A new launch starts: what it passes is counted from here."""
        self._read()
        self._latest = float("-inf")

    def _read(self) -> None:
        log = self.run_dir / "logs" / "train.jsonl"
        if not log.is_file():
            return
        with log.open("rb") as fh:
            fh.seek(self._offset)
            chunk = fh.read()
        whole = chunk[: chunk.rfind(b"\n") + 1]
        self._offset += len(whole)
        for key in map(_log_key, whole.decode().splitlines()):
            self._seen.add(key)
            self._latest = max(self._latest, self._order.get(key, float("-inf")))

    def reached(self, key: str, pid: int) -> float | None:
        """Where on the straight run's timeline the launch ``pid`` is known to be once it has reached
        landmark ``key`` (that landmark's time, or a later one's this launch logged); None before."""
        if not _claimed_by(self.run_dir, pid):
            return None  # this launch has not started its run yet
        at = self._order.get(key, 0.0)
        if key == "claim":
            return 0.0
        if key.startswith("file:"):
            return at if (self.run_dir / key[5:]).exists() else None
        self._read()
        if self._latest > at:
            return self._latest
        return at if key in self._seen else None


@dataclass
class Kill:
    moment: float  # on the straight run's timeline: seconds from its claim (negative: before it)
    after: str  # when the kill was sent
    landed: str = ""  # where the run was: its last log event and its outputs so far

    def __str__(self) -> str:
        return f"{self.moment:+6.2f} s  {self.after:<58} {self.landed}"


def _where(run_dir: Path) -> str:
    """The run's last log line and which of its outputs exist, as one line."""
    log = run_dir / "logs" / "train.jsonl"
    lines = log.read_text(encoding="utf-8").splitlines() if log.is_file() else []
    last = json.loads(lines[-1]) if lines else {}
    saved = sorted(p.name for p in (run_dir / "students").iterdir()) if (run_dir / "students").is_dir() else []
    files = [n for n in ("config.resolved.yaml", "teacher", "model", "results.json", "summary.md", "report.html")
             if (run_dir / n).exists()]
    event = f"{last.get('stage')}:{last.get('event')}@{last.get('step')}" if last else "no log"
    return f"log {event}; {' '.join(files + saved) or 'nothing'}"


def _kill_run(recipe: Path, env: dict, run_dir: Path, moments: list[float], line: Timeline,
              errs: Path, kills: list[Kill]) -> None:
    """Launch, kill at each moment (see the module docstring; appended to ``kills``), relaunch
    with --resume; the last launch runs to the end. Raises ``AssertionError`` when a launch fails
    or ends before its kill. A resumed launch has only what is left to do: where a kill came after
    it had finished the run (results.json written: the kill met a finished process), the moments
    left fall after the run's end, and no launch follows (``--resume`` of a finished run is refused)."""
    progress = Progress(run_dir, line)
    for k, moment in enumerate([*moments, None]):
        if k and (run_dir / "results.json").is_file():
            return
        err = errs / f"launch-{k}.txt"
        progress.launch()
        with err.open("w") as fh:
            proc = warm.popen(_cmd(recipe, run_dir, *(["--resume"] if k else [])), env=env,
                                    stdout=subprocess.DEVNULL, stderr=fh)
        t0 = time.monotonic()
        if moment is None:
            assert proc.wait(timeout=600) == 0, f"the last launch failed:\n{err.read_text()[-3000:]}"
            return
        if moment < 0:  # from the launch; at its claim if it gets there first (under less load)
            early = _wait(proc, lambda pid=proc.pid: _claimed_by(run_dir, pid), t0 + line.claim_s + moment)
            after = f"{time.monotonic() - t0:.2f} s after launch" + (", at its claim" if early else "")
            alive = proc.poll() is None
        else:
            mark, key = line.before(moment)
            at: list[float] = []  # where the launch was when it was seen past the landmark

            def arrived(pid: int = proc.pid, key: str = key, at: list[float] = at) -> bool:
                at.append(progress.reached(key, pid))
                return at[-1] is not None

            reached = _wait(proc, arrived, t0 + 600)
            after = f"{moment - at[-1]:.2f} s after {key}" if reached else f"before {key}"
            if reached and at[-1] > mark:
                after += f" (seen at a later landmark, {at[-1] - mark:.2f} s on)"
            alive = reached and not _wait(proc, lambda: False, time.monotonic() + max(0.0, moment - at[-1]))
        if not alive:
            rc = proc.wait()
            raise AssertionError(f"launch {k} ended (exit {rc}) before its kill ({after}):\n"
                                 f"{err.read_text()[-3000:]}")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        kills.append(Kill(moment, after, _where(run_dir)))


def _model_files(run_dir: Path) -> dict[str, Path]:
    """Every file of every saved model dir (the teacher, each student and step, model/), by relative path."""
    dirs = [run_dir / "teacher", run_dir / "model", *sorted((run_dir / "students").iterdir())]
    return {str(f.relative_to(run_dir)): f for d in dirs for f in sorted(d.rglob("*")) if f.is_file()}


def _outputs(run_dir: Path) -> set[str]:
    """Every file and folder of a run dir but its resume state (checkpoints/), its log of every
    launch (logs/) and its lock: what a user gets, where a killed launch's leftovers would show."""
    skip = ("checkpoints", "logs", ".lock")
    return {str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.relative_to(run_dir).parts[0] not in skip}


def _tensor_diff(a: Path, b: Path) -> list[str]:
    """Names of the tensors that differ (in dtype or any bit) between two safetensors files."""
    import torch
    from safetensors.torch import load_file

    ta, tb = load_file(str(a)), load_file(str(b))
    if ta.keys() != tb.keys():
        return [f"tensor names differ: {sorted(ta.keys() ^ tb.keys())}"]
    bits = lambda t: t.contiguous().view(-1).view(torch.uint8)  # noqa: E731
    return [k for k in ta if ta[k].dtype != tb[k].dtype or not bits(ta[k]).equal(bits(tb[k]))]


def _json_diff(a: Any, b: Any, where: str = "") -> list[str]:
    """Paths where two parsed results.json (``a`` straight, ``b`` killed) differ, skipping the keys
    of :data:`MEASURED` and allowing those of :data:`RESUMED_ONLY` in ``b``."""
    if isinstance(a, dict) and isinstance(b, dict):
        only = (a.keys() ^ b.keys()) - ((b.keys() - a.keys()) & RESUMED_ONLY)
        out = [f"{where}.{k}: only in {'the straight run' if k in a else 'the killed run'}" for k in sorted(only)]
        for k in a.keys() & b.keys():
            if k not in MEASURED:
                out += _json_diff(a[k], b[k], f"{where}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items vs {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _json_diff(x, y, f"{where}[{i}]")]
    return [] if a == b and type(a) is type(b) else [f"{where}: {a!r} vs {b!r}"]


def test_sigkill_at_ten_random_moments_then_resume_matches_a_straight_run(tmp_path: Path) -> None:
    model = make_tiny_model_dir(tmp_path / "tiny-bert")
    glue = make_tiny_glue(tmp_path / "glue", n_train=512)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TINYPLM_CACHE": str(tmp_path / "no-cache")}
    # each run its own teacher-logit cache, so the killed run computes (and may half-write) its own
    recipes = {name: write_recipe(tmp_path / f"{name}.yaml", _recipe(tmp_path, model, glue, tmp_path / f"cache-{name}"))
               for name in ("straight", "killed")}
    straight, killed, errs = tmp_path / "straight", tmp_path / "killed", tmp_path / "stderr"
    errs.mkdir()
    line = _straight(_cmd(recipes["straight"], straight), env, straight, errs / "straight.txt")

    rng = random.Random(SEED)
    last = line.at(f"file:{LAST}")
    moments = sorted(rng.uniform(-min(LEAD, line.claim_s), last) for _ in range(KILLS))
    kills: list[Kill] = []
    try:
        _kill_run(recipes["killed"], env, killed, moments, line, errs, kills)
        problems = _compare(straight, killed)
    except AssertionError as err:
        problems = [str(err)]
    story = (f"seed {SEED}; the straight run claimed its dir {line.claim_s:.2f} s after launch and wrote "
             f"{LAST} {last:.2f} s after that; kills (moment from the claim, when, where):\n"
             + "\n".join(map(str, kills)))
    print(story)
    assert not problems, story + "\n" + "\n".join(problems)
    log = [json.loads(x) for x in (killed / "logs" / "train.jsonl").read_text().splitlines()]
    assert any(e["event"] == "resume" for e in log), story


def _compare(straight: Path, killed: Path) -> list[str]:
    """What differs between the two finished runs' models and results.json."""
    problems = []
    sa, sb = _outputs(straight), _outputs(killed)
    if sa != sb:
        problems.append(f"run dirs differ: only the straight one has {sorted(sa - sb)}, "
                        f"only the killed one {sorted(sb - sa)}")
    a, b = _model_files(straight), _model_files(killed)
    if a.keys() != b.keys():
        problems.append(f"model files differ: {sorted(a.keys() ^ b.keys())}")
    for rel in sorted(a.keys() & b.keys()):
        if Path(rel).name == MODEL_CARD or a[rel].read_bytes() == b[rel].read_bytes():
            continue
        extra = f" (tensors {_tensor_diff(a[rel], b[rel])})" if rel.endswith(".safetensors") else ""
        problems.append(f"{rel} differs{extra}")
    ra, rb = (json.loads((d / "results.json").read_text()) for d in (straight, killed))
    problems += [f"results.json{d}" for d in _json_diff(ra, rb)]
    return problems
