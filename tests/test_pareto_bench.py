"""benchmarks/pareto.py: the Pareto front over hand-made points (ties and dominated points), the
throughput checks, the dev batches, the interleaved measurement, the exit without model2vec, and a
tiny run measured end to end beside a fake peer (JSON, table, plot, front, checks)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import pareto as pb
from conftest import TINY_TRAIN, make_tiny_glue, make_tiny_model_dir, tiny_recipe, write_recipe
from tinyplm.tasks.base import Example


def _point(name: str, accuracy: float, rate: float, kind: str = "student") -> pb.Point:
    return pb.Point(name, "r", name, "bert", kind, "torch fp32", 1_000_000, accuracy=accuracy, sent_per_s=rate)


def test_the_front_drops_points_another_beats_on_both_axes() -> None:
    points = [(0.90, 100.0), (0.85, 1000.0), (0.80, 500.0), (0.70, 5000.0), (0.88, 90.0)]
    assert pb.pareto_front(points) == [0, 1, 3]  # (0.80, 500) and (0.88, 90) are dominated; throughput order


def test_the_front_keeps_equal_points_and_drops_a_tie_on_one_axis_only() -> None:
    points = [(0.7, 100.0), (0.8, 100.0), (0.8, 100.0), (0.8, 50.0), (0.6, 300.0)]
    # (0.7, 100): same throughput, less accurate; (0.8, 50): same accuracy, slower
    assert pb.pareto_front(points) == [1, 2, 4]
    assert pb.pareto_front([]) == [] and pb.pareto_front([(0.5, 1.0)]) == [0]


def test_checks_take_the_best_tinyplm_point_above_each_rate_and_leave_the_peer_out() -> None:
    points = [_point("teacher", 0.90, 200.0), _point("small", 0.83, 9000.0), _point("mid", 0.86, 4500.0),
              _point("slow", 0.80, 300.0), _point(pb.PEER, 0.74, 30000.0, kind="peer")]
    front = pb.mark_front(points)
    assert [p.name for p in front] == ["teacher", "mid", "small", pb.PEER]
    assert [p.on_front for p in points] == [True, True, True, False, True]
    found = pb.checks(points, ["8600:0.82", "4000:0.85", "4000:0.9", "20000:0.5"])
    assert [(c.best.name if c.best else None, c.met) for c in found] == [
        ("small", True), ("mid", True), ("mid", False), (None, False)]
    assert "mid" in found[1].line() and found[1].line().endswith("met") and found[2].line().endswith("not met")
    assert "none" in found[3].line() and found[3].line().endswith("not met")


def test_dev_batches_are_sorted_by_length_and_the_gold_labels_follow() -> None:
    texts = ["a b c d", "a", "a b", "a b c", "ab", "a b c d e"]
    examples = [Example(t, None, i % 2) for i, t in enumerate(texts)]
    batches, gold = pb.dev_batches(examples, ("neg", "pos"), batch=4)
    assert batches == [["a", "ab", "a b", "a b c"], ["a b c d", "a b c d e"]]
    assert gold == ["pos", "neg", "neg", "pos", "neg", "pos"]


def test_measure_scores_the_first_pass_and_times_every_model_in_rotating_rounds() -> None:
    batches, gold = [["x", "y"], ["z"]], ["pos", "neg", "pos"]
    calls: list[str] = []

    def model(name: str, labels: list[str], pause: float) -> pb.Contender:
        def predict(texts: list[str]) -> list[str]:
            calls.append(name)
            time.sleep(pause)
            return labels[: len(texts)] if len(texts) == 2 else labels[2:]
        return pb.Contender(pb.Point(name, "r", name, "bert", "student", "torch fp32", 2_000_000), predict)

    right, wrong = model("right", gold, 0.0), model("slow", ["neg", "neg", "neg"], 0.02)
    points = pb.measure([right, wrong], batches, gold, rounds=3)
    assert [p.accuracy for p in points] == [1.0, round(1 / 3, 4)]
    assert points[0].sent_per_s > points[1].sent_per_s > 0 and points[1].sent_per_s < 3 / 0.04
    passes = [calls[i] for i in range(0, len(calls), 2)]  # two batches a pass
    assert passes == ["right", "slow", "right", "slow", "slow", "right", "right", "slow"]
    calls.clear()
    pb.measure([wrong], batches, gold, rounds=2, min_seconds=0.1)  # one pass lasts >= 0.04 s: a round needs 2 or 3
    assert 2 * 2 * 2 <= len(calls) - 2 <= 2 * 3 * 2  # after the warm-up pass: 2 rounds of 2 or 3 passes of 2 batches


def test_without_model2vec_it_exits_2_naming_the_install(monkeypatch, capsys) -> None:
    monkeypatch.setattr(pb, "peer_available", lambda: False)
    with pytest.raises(SystemExit) as stopped:
        pb.parse([])
    said = capsys.readouterr().err
    assert stopped.value.code == 2 and 'pip install "model2vec[distill]" transformers==' in said and "--no-peer" in said
    assert pb.parse(["--no-peer"]).check == list(pb.CHECKS)


STAGES = ("teacher", "teacher-best.onnx_dynamic_int8", "static", "student-L1")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[Path, Path]:
    """A finished tiny run (teacher, its int8 ONNX copy, a static student, a one-layer student) -> its
    recipe and another recipe never run."""
    from tinyplm.config import load_recipe
    from tinyplm.run import run

    tmp = tmp_path_factory.mktemp("pareto")
    model, glue = make_tiny_model_dir(tmp / "bert"), make_tiny_glue(tmp / "glue", n_train=64, n_dev=40)
    short = {**TINY_TRAIN, "max_steps": 3}
    int8 = [{"kind": "onnx_dynamic_int8"}]
    students = [{"name": "teacher-best", "init_from": "teacher", "stages": [], "compress": int8},
                {"name": "static", "family": {"arch": "static", "static": {"dims": 16, "table_dtype": "int8"}},
                 "objective": {"kd_weight": 1.0, "hard_weight": 0.5}, "train": short},
                {"name": "student-L1", "teacher_layers": [1], "train": short}]
    recipe = tiny_recipe(tmp, model, glue, students=students)
    recipe["teacher"]["finetune"]["max_steps"] = 3
    other = {**tiny_recipe(tmp, model, glue), "name": "other", "output_dir": str(tmp / "runs" / "other")}
    path = write_recipe(tmp / "tiny.yaml", recipe)
    run(load_recipe(path))
    return path, write_recipe(tmp / "other.yaml", other)


def _fake_peer(data, model: str, pca_dims: int, folder: Path) -> pb.Contender:
    return pb.Contender(pb.Point(pb.PEER, "peer", "model2vec-lr", "model2vec", "peer", "numpy", 1000),
                        lambda texts: ["positive"] * len(texts))


@pytest.mark.slow
def test_a_tiny_run_is_measured_beside_the_peer_and_its_front_drawn(tiny, tmp_path: Path, monkeypatch,
                                                                     capsys) -> None:
    recipe, other = tiny
    monkeypatch.setattr(pb, "peer_available", lambda: True)
    monkeypatch.setattr(pb, "build_peer", _fake_peer)
    path = pb.main(["--recipes", str(recipe), "--if-finished", str(other), "--out", str(tmp_path / "b"),
                    "--rounds", "2", "--min-round-seconds", "0.02", "--check", "1:0", "--check", "1e9:0.5"])
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed[-1] == str(path)
    got = json.loads(path.read_text())
    points = {p["name"]: p for p in got["points"]}
    assert set(points) == {f"tiny/{s}" for s in STAGES} | {pb.PEER}
    assert points["tiny/static"]["family"] == "static" and points["tiny/teacher"]["family"] == "bert"
    assert points["tiny/teacher-best.onnx_dynamic_int8"]["runtime"].startswith("onnxruntime")
    assert got["skipped"][0]["recipe"] == str(other) and not (recipe.parent / "runs" / "other").exists()
    dev = (recipe.parent / "glue" / "SST-2" / "dev.tsv").read_text().splitlines()[1:]
    assert points[pb.PEER]["accuracy"] == round(sum(r.endswith("\t1") for r in dev) / len(dev), 4)
    for p in got["points"]:
        assert p["sent_per_s"] > 0 and p["disk_bytes"] > 0
        if p["kind"] != "peer":  # the run's own dev figure, as evaluate scored it
            assert p["accuracy"] == pytest.approx(p["recorded_accuracy"], abs=1.01 / len(dev))
    for p in got["points"]:
        beaten = any(q["accuracy"] >= p["accuracy"] and q["sent_per_s"] >= p["sent_per_s"]
                     and (q["accuracy"], q["sent_per_s"]) != (p["accuracy"], p["sent_per_s"]) for q in got["points"])
        assert p["on_front"] is not beaten
    assert got["front"] == [p["name"] for p in sorted(got["points"], key=lambda p: p["sent_per_s"]) if p["on_front"]]
    best = max((p for p in got["points"] if p["kind"] != "peer"), key=lambda p: (p["accuracy"], p["sent_per_s"]))
    assert [(c["met"], c["best"] and c["best"]["name"]) for c in got["checks"]] == [(True, best["name"]), (False, None)]
    assert Path(got["plot"]).read_bytes()[:4] == b"\x89PNG"
    assert Path(got["table"]).read_text().count("\n| ") == len(points)
    assert "tiny/static |" in "\n".join(printed)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["--if-finished", "--runs"])
def test_a_finished_run_is_read_by_recipe_or_as_it_is_without_the_peer(tiny, tmp_path: Path, how: str) -> None:
    recipe, _ = tiny
    given = recipe if how == "--if-finished" else recipe.parent / "runs" / "tiny"
    path = pb.main(["--recipes", "--if-finished", how, str(given), "--out", str(tmp_path), "--rounds", "1",
                    "--min-round-seconds", "0", "--no-peer"])
    got = json.loads(path.read_text())
    assert {p["name"] for p in got["points"]} == {f"tiny/{s}" for s in STAGES} and got["peer"] is None


@pytest.mark.slow
def test_a_run_dir_holding_another_recipe_is_refused_or_skipped_naming_runs(tiny, tmp_path: Path) -> None:
    import yaml

    recipe, _ = tiny
    changed = yaml.safe_load(recipe.read_text())
    changed["teacher"]["finetune"]["lr"] = 1e-4  # the same output dir, another recipe
    changed = write_recipe(tmp_path / "changed.yaml", changed)
    with pytest.raises(SystemExit, match="--runs"):
        pb.main(["--recipes", str(changed), "--if-finished", "--no-peer", "--out", str(tmp_path / "out")])
    path = pb.main(["--recipes", "--if-finished", str(changed), "--runs", str(recipe.parent / "runs" / "tiny"),
                    "--no-peer", "--rounds", "1", "--min-round-seconds", "0", "--out", str(tmp_path / "out")])
    skipped = json.loads(path.read_text())["skipped"]  # an optional recipe is skipped, naming --runs too
    assert [s["recipe"] for s in skipped] == [str(changed)] and "--runs" in skipped[0]["why"]
