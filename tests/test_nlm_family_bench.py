"""benchmarks/nlm_family.py: its recipes validate with the benchmark's overrides, and a tiny run
prints one JSON row per model, the seeds' summary and, last, the path of the JSON it wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import nlm_family as nf
from conftest import TINY_TRAIN, make_tiny_glue, make_tiny_model_dir, tiny_recipe, write_recipe
from tinyplm.config import load_recipe


@pytest.mark.parametrize("task", ["goodreads_spoilers", "tvtropes_spoilers"])
def test_recipe_validates_with_the_benchmark_overrides(task: str, tmp_path: Path) -> None:
    args = nf.parse(["--task", task, "--out", str(tmp_path), "--student-minutes", "1", "--teacher-minutes", "3"])
    cfg = load_recipe(args.recipe, nf.overrides(args, load_recipe(args.recipe)))
    assert cfg.task.name == task and cfg.teacher.finetune.budget_minutes == 3
    assert cfg.augment.mlm == str(tmp_path / "mlm")
    trained = [s for s in cfg.students if s.family.arch != "tfidf_lr"]
    assert trained and all(st.train.budget_minutes == 1 for s in trained for st in s.stage_specs())
    names = {s.name for s in cfg.students}
    assert {f"{g}-s{i}" for g in ("bilstm-alone", "bilstm-kd", "bilstm-kd-aug") for i in (1, 2, 3)} <= names


def test_summary_compares_distilled_seeds_with_the_bilstm_alone() -> None:
    table = [{"model": m, "roc_auc": v, "x_teacher_throughput": 20.0} for m, v in
             [("bilstm-alone-s1", 0.60), ("bilstm-alone-s2", 0.62), ("bilstm-kd-s1", 0.65), ("bilstm-kd-s2", 0.67),
              ("tfidf", 0.58)]]
    out = nf.summary(table, "roc_auc")
    assert out["groups"]["bilstm-alone"] == {"seeds": 2, "mean": 0.61, "spread": 0.02, "stdev": 0.0141,
                                             "x_teacher_throughput": 20.0}
    assert out["distilled_vs_alone"]["bilstm-kd - bilstm-alone"]["points"] == 5.0
    assert "tfidf" not in out["groups"]


@pytest.mark.slow
def test_a_tiny_run_prints_rows_summary_and_its_path(tmp_path: Path, capsys) -> None:
    short = {**TINY_TRAIN, "max_steps": 3}
    bilstm = {"arch": "bilstm", "hidden": 4, "embeddings": {"dim": 8}}
    students = [{"name": "tfidf", "family": {"arch": "tfidf_lr"}}] + [
        {"name": f"{g}-s{i}", "family": bilstm, "objective": obj, "train": {**short, "seed": i}}
        for g, obj in (("bilstm-alone", {"kd_weight": 0, "hard_weight": 1}), ("bilstm-kd", {"kd_weight": 0,
                                                                                          "logit_mse": 1}))
        for i in (1, 2)]
    recipe = tiny_recipe(tmp_path, make_tiny_model_dir(tmp_path / "bert"), make_tiny_glue(tmp_path / "glue", 64, 32),
                         students=students)
    recipe["teacher"]["finetune"]["max_steps"] = 3
    path = nf.main(["--recipe", str(write_recipe(tmp_path / "r.yaml", recipe)), "--out", str(tmp_path / "b")])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == str(path)
    rows = [json.loads(x) for x in lines[:6]]
    assert [r["model"] for r in rows][:2] == ["teacher", "tfidf"] and rows[1]["above_floor_points"] == 0.0
    assert set(json.loads(lines[6])["distilled_vs_alone"]) == {"bilstm-kd - bilstm-alone"}
    written = json.loads(path.read_text())
    assert len(written["rows"]) == 6 and Path(written["plots"]["roc"]).is_file()
