"""End to end through the real CLI on a tiny recipe: the run dir's files and results.json schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import helpers_warm as warm
from conftest import TINY_TRAIN, make_tiny_glue, make_tiny_model_dir, tiny_recipe, write_recipe
from tinyplm.report.records import STAGE_KEYS

pytestmark = pytest.mark.slow


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "TINYPLM_CACHE": str(cwd / "cache"), "OMP_NUM_THREADS": "1"}
    return warm.run([sys.executable, "-m", "tinyplm.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("e2e")
    model = make_tiny_model_dir(tmp / "tiny-bert")
    glue = make_tiny_glue(tmp / "glue")
    students = [
        {"name": "random-L1", "shape": {"layers": 1, "hidden": 16, "heads": 2, "ffn": 20},
         "objective": {"temperature": 2.0, "kd_weight": 1.0, "hard_weight": 0.5},
         "train": {**TINY_TRAIN, "epochs": 3, "eval_every": 16, "checkpoint_every": 16}},
        {"name": "layers-1", "teacher_layers": [1], "train": {**TINY_TRAIN, "epochs": 2}},
    ]
    recipe = write_recipe(tmp / "tiny.yaml", tiny_recipe(tmp, model, glue, students=students))
    res = cli("run", str(recipe), "--resume", cwd=tmp)  # nothing to continue: said, and a new run starts
    assert res.returncode == 0, res.stderr[-2000:]
    run_dir = tmp / "runs" / "tiny"
    (tmp / "run.stderr").write_text(res.stderr, encoding="utf-8")
    assert f"report: {run_dir / 'report.html'}" in res.stdout.replace("\n", "")
    (tmp / "run.stdout").write_text(res.stdout, encoding="utf-8")
    return run_dir


def test_run_dir_holds_every_output(finished_run: Path) -> None:
    expected = [
        "config.resolved.yaml", "logs/train.jsonl", "checkpoints", "results.json", "summary.md",
        "report.html", "plots/accuracy_vs_latency.png", "model/config.json", "model/model.safetensors",
        "model/README.md", "teacher/model.safetensors", "teacher/tokenizer.json",
        "students/random-L1/model.safetensors", "students/layers-1/tokenizer.json",
    ]
    missing = [p for p in expected if not (finished_run / p).exists()]
    assert not missing
    stages = {json.loads(line)["stage"] for line in (finished_run / "logs/train.jsonl").read_text().splitlines()}
    assert stages == {"teacher", "random-L1", "layers-1"}


def test_resume_with_no_run_to_continue_says_a_new_one_starts(finished_run: Path) -> None:
    """--resume on a folder that holds no run (a typo, a relative output_dir from another folder)
    started a new run without a word: the user believed it continued."""
    said = (finished_run.parents[1] / "run.stderr").read_text(encoding="utf-8").replace("\n", "")
    assert f"note: --resume: {finished_run} holds no run to continue; a new run starts there" in said


def test_the_run_states_its_cpu_kind(finished_run: Path) -> None:
    """Before any work and again beside the table: which kind of CPU the speed figures hold on;
    results.json records it with the CPU's name and, where int8 gains little, says so."""
    from tinyplm.evaluate.cpu_kind import cpu_kind

    kind = cpu_kind()
    stdout = " ".join((finished_run.parent.parent / "run.stdout").read_text(encoding="utf-8").split())
    assert stdout.startswith(" ".join(kind.line().split()))
    assert f"measured on: {kind.model} ({kind.described()})" in stdout
    assert (kind.int8_note is not None) == ("int8 gains little on this CPU" in stdout)
    machine = json.loads((finished_run / "results.json").read_text())["info"]["machine"]
    assert machine["cpu"] == kind.model and machine["kind"] == kind.described()
    assert machine.get("int8_note") == kind.int8_note
    assert kind.described() in (finished_run / "summary.md").read_text(encoding="utf-8")


def test_results_json_follows_the_schema(finished_run: Path) -> None:
    data = json.loads((finished_run / "results.json").read_text())
    assert data["task"] == "sst2" and data["metric"] == "accuracy"
    assert [s["name"] for s in data["stages"]] == ["teacher", "random-L1", "layers-1"]
    for stage in data["stages"]:
        assert set(STAGE_KEYS) <= set(stage)
        assert 0.0 <= stage["metrics"]["accuracy"] <= 1.0
        assert stage["params"] > stage["params_no_embeddings"] > 0
        assert stage["disk_bytes"] > 0 and stage["throughput_sent_per_s"] > 0
        assert stage["latency_ms_p90_b1"] >= stage["latency_ms_p50_b1"] > 0
    teacher = data["stages"][0]
    assert teacher["metrics"]["accuracy"] >= 0.9  # the toy task is learnable
    html = (finished_run / "report.html").read_text()
    assert "data:image/png;base64," in html and "random-L1" in html


def test_saved_model_loads_with_auto_classes_and_predicts_the_same(finished_run: Path) -> None:
    """model/ loads with the Auto classes alone and reproduces the accuracy tinyplm measured."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from tinyplm import tasks

    data = json.loads((finished_run / "results.json").read_text())
    final = next(s for s in data["stages"] if s["name"] == data["info"]["final_model"])
    model = AutoModelForSequenceClassification.from_pretrained(finished_run / "model").eval()
    tok = AutoTokenizer.from_pretrained(finished_run / "model")
    dev = tasks.get("sst2", finished_run.parent.parent / "glue").read("dev").examples
    batch = tok([e.text for e in dev], padding=True, truncation=True, max_length=32, return_tensors="pt")
    preds = model(**batch).logits.argmax(-1).tolist()
    acc = sum(int(p == e.label) for p, e in zip(preds, dev, strict=True)) / len(dev)
    assert acc == pytest.approx(final["metrics"]["accuracy"])


#: Training losses logged by the seeded tiny run above (stage, step) -> mean loss over the log
#: interval, one thread, fp32. Recorded at the commit that moved the loop to tinyplm.train, and
#: bit-identical to the run before that restructure: any change to batching, masking, LR schedule,
#: objectives or initialisation moves them. rel 1e-3 leaves room for other CPUs' float rounding.
PINNED_LOSSES = {
    ("teacher", 20): 0.694025, ("teacher", 40): 0.502766, ("teacher", 64): 0.047828,
    ("random-L1", 20): 1.230956, ("random-L1", 48): 1.228847,
    ("layers-1", 20): 0.002206, ("layers-1", 32): 0.000602,
}


def test_seeded_run_reproduces_its_pinned_losses(finished_run: Path) -> None:
    events = [json.loads(line) for line in (finished_run / "logs/train.jsonl").read_text().splitlines()]
    logged = {(e["stage"], e["step"]): e["loss"] for e in events if e["event"] == "train"}
    assert set(PINNED_LOSSES) <= set(logged), sorted(logged)
    for key, loss in PINNED_LOSSES.items():
        assert logged[key] == pytest.approx(loss, rel=1e-3), key


def test_report_rebuilds_without_rerunning(finished_run: Path) -> None:
    (finished_run / "report.html").unlink()
    (finished_run / "summary.md").unlink()
    res = cli("report", str(finished_run), cwd=finished_run)
    assert res.returncode == 0, res.stderr
    assert (finished_run / "report.html").is_file() and (finished_run / "summary.md").is_file()


def test_evaluate_and_bench_subcommands(finished_run: Path) -> None:
    glue = str(finished_run.parent.parent / "glue")
    res = cli("evaluate", str(finished_run / "teacher"), "--task", "sst2", "--data-dir", glue, "--json",
              "--max-length", "32", cwd=finished_run)
    assert res.returncode == 0, res.stderr
    teacher = json.loads((finished_run / "results.json").read_text())["stages"][0]
    assert json.loads(res.stdout)["metrics"]["accuracy"] == pytest.approx(teacher["metrics"]["accuracy"])
    out = finished_run.parent / "bench"
    res = cli("bench", str(finished_run / "teacher"), str(finished_run / "model"), "--task", "sst2",
              "--data-dir", glue, "--max-length", "32", "--rounds", "1", "--out", str(out), cwd=finished_run)
    assert res.returncode == 0, res.stderr
    bench = json.loads((out / "results.json").read_text())
    assert [s["name"] for s in bench["stages"]] == ["teacher", "model"]


def test_evaluate_and_bench_read_dev_alone(finished_run: Path, tmp_path: Path) -> None:
    """A task had as its dev file alone (GLUE's QNLI often is) could not be evaluated: both
    commands read the train split first and stopped at its missing file."""
    import shutil

    glue = tmp_path / "glue"
    shutil.copytree(finished_run.parent.parent / "glue", glue)
    (glue / "SST-2" / "train.tsv").unlink()
    res = cli("evaluate", str(finished_run / "teacher"), "--task", "sst2", "--data-dir", str(glue), "--json",
              "--max-length", "32", cwd=finished_run)
    assert res.returncode == 0, res.stderr
    teacher = json.loads((finished_run / "results.json").read_text())["stages"][0]
    assert json.loads(res.stdout)["metrics"]["accuracy"] == pytest.approx(teacher["metrics"]["accuracy"])
    res = cli("bench", str(finished_run / "teacher"), "--task", "sst2", "--data-dir", str(glue), "--max-length", "32",
              "--rounds", "1", cwd=finished_run)
    assert res.returncode == 0, res.stderr


def test_a_model_scored_on_another_task_than_its_own_is_said(finished_run: Path, capsys) -> None:
    """An SST-2 model evaluated (or benched) with --task cola printed an MCC and nothing else."""
    from tinyplm.cli.evaluate import note_other_task

    note_other_task([finished_run / "teacher", finished_run], "SST-2")
    assert capsys.readouterr().err == ""
    note_other_task([finished_run / "teacher"], "cola")
    said = capsys.readouterr().err.replace("\n", " ")
    assert f"note: {finished_run / 'teacher'} was trained for sst2; scored on cola as it is" in said


def test_help_of_every_subcommand_has_an_example(tmp_path: Path) -> None:
    for cmd in ("run", "finetune", "distill", "evaluate", "bench", "report", "validate", "tasks"):
        res = cli(cmd, "--help", cwd=tmp_path)
        assert res.returncode == 0 and "Example: tinyplm" in res.stdout, cmd


def test_tasks_lists_every_glue_task(tmp_path: Path) -> None:
    res = cli("tasks", cwd=tmp_path)
    assert res.returncode == 0
    for name in ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli", "squad", "squad_v2",
                 "conll2003"):
        assert name in res.stdout
    assert "answer span" in res.stdout and "B-PER" in res.stdout
