"""The benchmarks' recipes stay valid as the schema changes (no training here)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

import compress_pareto as cp
import distill_ablation as ab
from tinyplm.config import validate_recipe
from tinyplm.errors import RunDirError


@pytest.mark.parametrize("task", ["sst2", "mrpc"])
def test_compress_pareto_recipe_validates(task: str, tmp_path: Path) -> None:
    args = argparse.Namespace(task=task, budget_minutes=6, recover_minutes=2, teacher=None, teacher_minutes=None,
                              variants=["all"])
    cfg = validate_recipe(cp.recipe(args, tmp_path), source="compress_pareto")
    names = [s.name for s in cfg.students]
    assert names[0] == "student" and "student-combined" in names and "teacher-half" in names
    assert all(s.init_from in ("student", "teacher") for s in cfg.students[1:])
    assert len(names) == 1 + len(cp.VARIANTS)


def test_compress_pareto_variant_choice(tmp_path: Path) -> None:
    args = argparse.Namespace(task="mrpc", budget_minutes=6, recover_minutes=2, teacher=None, teacher_minutes=None,
                              variants=["student-combined", "teacher-half"])
    names = [s.name for s in validate_recipe(cp.recipe(args, tmp_path), source="compress_pareto").students]
    assert names == ["student", "student-combined", "teacher-half"]


def test_pareto_front() -> None:
    # (latency, accuracy): the second point is dominated by the first
    assert cp.pareto([(1.0, 0.9), (2.0, 0.8), (3.0, 0.95), (0.5, 0.5)]) == [3, 0, 2]


@pytest.mark.parametrize("variant", ["kd", "tinybert", "minilm", "augment", "two-stage"])
def test_distill_ablation_recipes_validate(variant: str, tmp_path: Path) -> None:
    args = argparse.Namespace(task="mrpc", max_length=128)
    raw = ab.base_recipe(args, "minilm-l6", f"{variant}-seed0", tmp_path)
    student = {"name": variant, "stages": ab.variant_stages(variant, 3.0, 0)}
    student.update({"init_from": str(tmp_path / "general")} if variant == "two-stage" else {"shape": ab.SHAPE})
    raw["students"] = [student]
    raw["augment"] = {"mlm": str(tmp_path / "mlm"), "copies": 2}
    cfg = validate_recipe(raw, source="distill_ablation")
    stages = cfg.students[0].stages
    assert sum(s.train.budget_minutes for s in stages) == pytest.approx(3.0)  # equal budget


def _ablation_raw(ab, tmp_path: Path, minutes: float, share: float) -> dict:
    args = argparse.Namespace(task="mrpc", max_length=128)
    raw = ab.base_recipe(args, "minilm-l6", "tinybert-seed0", tmp_path)
    raw["students"] = [{"name": "tinybert", "shape": ab.SHAPE,
                        "stages": ab.variant_stages("tinybert", minutes, 0, share)}]
    return raw


def test_distill_ablation_intermediate_share(tmp_path: Path) -> None:
    cfg = validate_recipe(_ablation_raw(ab, tmp_path, 5.0, 0.3), source="distill_ablation")
    inter, pred = cfg.students[0].stages
    assert (inter.name, pred.name) == ("intermediate", "prediction")
    assert inter.train.budget_minutes == pytest.approx(1.5) and pred.train.budget_minutes == pytest.approx(3.5)
    assert len(ab.variant_stages("kd", 5.0, 0, 0.3)) == 1  # prediction-only KD has no intermediate stage


def test_distill_ablation_refuses_a_finished_run_of_another_recipe(tmp_path: Path) -> None:
    """Reusing a finished variant run is only right when it ran the same recipe (budget, share, teacher)."""
    from tinyplm.config import dump_resolved

    old = validate_recipe(_ablation_raw(ab, tmp_path, 2.0, 0.6), source="old")
    run_dir = tmp_path / "tinybert-seed0"
    run_dir.mkdir()
    (run_dir / "config.resolved.yaml").write_text(dump_resolved(old), encoding="utf-8")
    (run_dir / "results.json").write_text("{}", encoding="utf-8")
    with pytest.raises(RunDirError, match="another recipe"):
        ab.run_recipe(_ablation_raw(ab, tmp_path, 4.0, 0.6))
    assert (run_dir / "results.json").read_text(encoding="utf-8") == "{}"  # nothing overwritten


def test_distill_ablation_reuses_the_same_run_through_a_linked_dir(tmp_path: Path) -> None:
    """Another --out may link the shared runs: the same recipe found through the link is reused."""
    from tinyplm.config import dump_resolved
    from tinyplm.report import RunRecord, StageRecord

    (tmp_path / "a").mkdir()
    done = validate_recipe(_ablation_raw(ab, tmp_path / "a", 2.0, 0.6), source="done")
    run_dir = tmp_path / "a" / "tinybert-seed0"
    run_dir.mkdir()
    (run_dir / "config.resolved.yaml").write_text(dump_resolved(done), encoding="utf-8")
    RunRecord(task="mrpc", metric="f1",
              stages=[StageRecord(name="tinybert", metrics={"f1": 0.5})]).save(run_dir / "results.json")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    record = ab.run_recipe(_ablation_raw(ab, tmp_path / "b", 2.0, 0.6))
    assert record.stage("tinybert").metrics == {"f1": 0.5}


def test_distill_ablation_every_task_asks_for_the_same_general_student(tmp_path: Path, monkeypatch) -> None:
    """The general student is task-free and shared: the recipe asked for must not depend on --task."""
    asked = []
    monkeypatch.setattr(ab, "run_recipe", lambda raw: asked.append(raw))
    shared = tmp_path / "_shared"
    (shared / "mlm").mkdir(parents=True)
    (shared / "mlm" / "model.safetensors").write_bytes(b"")  # the MLM head counts as made
    for task in ("sst2", "rte"):
        args = argparse.Namespace(task=task, max_length=128, variants=["two-stage"], general_init="teacher-layers",
                                  general_minutes=20.0, mlm_steps=300, teacher="some/teacher")
        teacher, _, general = ab.prepare(args, tmp_path / task, shared)
        assert teacher == "some/teacher" and general == str(shared / "general" / "students" / "general")
    assert len(asked) == 2 and asked[0] == asked[1]
    assert asked[0]["students"][0]["teacher_layers"] == ab.GENERAL_LAYERS
