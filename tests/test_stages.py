"""A student with three stages: general distillation on a corpus, layer-wise on augmented task
data, then prediction-layer KD on the augmented data with the corpus beside it; every stage
saved, and a run killed in its last stage resumes without training the finished stages again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import (
    TINY_TRAIN,
    make_tiny_glue,
    make_tiny_mlm_dir,
    make_tiny_model_dir,
    tiny_recipe,
    write_recipe,
    write_tiny_corpus,
)
from tinyplm.config import load_recipe
from tinyplm.pretrain.corpus import read_corpus
from tinyplm.run import run

pytestmark = pytest.mark.slow


def _recipe(tmp_path: Path) -> Path:
    model = make_tiny_model_dir(tmp_path / "tiny-bert")
    glue = make_tiny_glue(tmp_path / "glue", n_train=64, n_dev=32)
    corpus = write_tiny_corpus(tmp_path / "corpus")
    short = {**TINY_TRAIN, "max_steps": 4}
    student = {
        "name": "tiny-student",
        "shape": {"layers": 1, "hidden": 16, "heads": 4, "ffn": 20},
        "stages": [
            {"name": "general", "data": "corpus", "teacher": "base",
             "objective": {"kd_weight": 0, "hidden": 1, "attention_scores": 1, "layer_map": "last"}, "train": short},
            {"name": "intermediate", "data": "augmented",
             "objective": {"kd_weight": 0, "hidden": 1, "embedding": 1, "attention_kl": 1}, "train": short},
            {"name": "prediction", "data": "augmented+corpus", "objective": {"kd_weight": 1, "temperature": 2},
             "train": short},
        ],
    }
    recipe = tiny_recipe(tmp_path, model, glue, students=[student])
    recipe["augment"] = {"mlm": str(make_tiny_mlm_dir(tmp_path / "mlm")), "copies": 2, "neighbours_from": "word2vec",
                         "max_examples": 40}
    recipe["corpus"] = {"paths": [str(corpus)], "max_length": 32}
    return write_recipe(tmp_path / "r.yaml", recipe)


def test_three_stage_student(tmp_path: Path) -> None:
    cfg = load_recipe(_recipe(tmp_path))
    record = run(cfg)
    run_dir = Path(cfg.output_dir)
    stage = next(s for s in record.stages if s.name == "tiny-student")
    infos = stage.info.training
    assert [i.stage for i in infos] == ["general", "intermediate", "prediction"]
    # 40 originals + 2 copies each, and the other 24 once; then those with the corpus paragraphs
    # beside them (the teacher's logits their targets), none of them a task text
    assert infos[0].teacher == "base" and infos[1].examples == 40 * 3 + 24
    paragraphs = read_corpus([tmp_path / "corpus"])
    assert infos[2].data == "augmented+corpus" and infos[2].examples == 40 * 3 + 24 + len(paragraphs) > 144
    assert all(i.steps == 4 for i in infos)
    for k in (0, 1):
        assert (run_dir / "students" / f"tiny-student.stage-{k}" / "model.safetensors").is_file()
    logged = {json.loads(line)["stage"] for line in (run_dir / "logs" / "train.jsonl").read_text().splitlines()}
    assert {"tiny-student/general", "tiny-student/intermediate", "tiny-student/prediction", "augment"} <= logged
    assert len(list((tmp_path / "cache" / "word2vec").glob("*.safetensors"))) == 1  # trained on the corpus


def test_a_run_killed_in_the_last_stage_resumes_without_redoing_the_others(tmp_path: Path, monkeypatch) -> None:
    import tinyplm.run.students as students

    cfg = load_recipe(_recipe(tmp_path))
    real_train = students.train

    def killed_in_prediction(model, data, objective, **kw):
        if kw["io"].name == "tiny-student/prediction":
            raise KeyboardInterrupt  # the process dies as the last stage starts
        return real_train(model, data, objective, **kw)

    monkeypatch.setattr(students, "train", killed_in_prediction)
    with pytest.raises(KeyboardInterrupt):
        run(cfg)
    run_dir = Path(cfg.output_dir)
    done = {p.name for p in (run_dir / "students").iterdir()}
    assert done == {"tiny-student.stage-0", "tiny-student.stage-1"}
    log = run_dir / "logs" / "train.jsonl"
    lines_before = len(log.read_text().splitlines())
    monkeypatch.setattr(students, "train", real_train)

    record = run(cfg, resume=True)
    infos = next(s for s in record.stages if s.name == "tiny-student").info.training
    assert [i.reused for i in infos] == [True, True, False]
    assert [i.steps for i in infos] == [4, 4, 4]  # a reused stage is reported as the run that made it did
    after = [json.loads(x) for x in log.read_text().splitlines()[lines_before:]]
    trained = {e["stage"] for e in after if e["event"] == "train"}
    assert trained == {"tiny-student/prediction"}  # the teacher and the first two stages were reused
    assert (run_dir / "results.json").is_file()
