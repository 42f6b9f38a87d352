"""The embedding task's static student (``family.arch: static_sentence``) end to end in a tiny world: its
table made from the tiny sentence teacher the Model2Vec way, trained by the one loop on the teacher's
vectors, kept on the held-out split, saved so that tinyplm and sentence-transformers load it with the
same vectors, and measured beside the teacher; the benchmark against Model2Vec on the run's dir; and
the recipe and preflight refusals that name the field."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import yaml

from helpers_doc_world import write_tiny_data
from helpers_embedding import make_sentence_dir
from tinyplm.config import dump_resolved, load_recipe
from tinyplm.errors import RecipeError
from tinyplm.run import run

pytestmark = pytest.mark.slow

#: The tiny teacher's width: a table as wide needs no projection, so its vectors compare with the teacher's as they are.
WIDTH = 32
STATIC = {"name": "static", "family": {"arch": "static_sentence", "static": {"dims": WIDTH}},
          "objective": {"vector_cosine": 1.0},
          "train": {"epochs": 6, "batch_size": 8, "lr": 0.05, "weight_decay": 0.0, "eval_every": 10,
                    "checkpoint_every": 10, "warmup_ratio": 0.0}}


def _recipe(tmp_path: Path, students: list[dict], task: str = "embedding") -> Path:
    data = tmp_path / "data"
    if not data.is_dir():
        write_tiny_data(data)
    teacher = make_sentence_dir(tmp_path / "teacher") if task == "embedding" else None
    if task == "embedding":
        task_section = {"name": "embedding", "data_dir": str(data), "max_length": 32, "eval_max_length": 48,
                        "holdout": 8}
    else:
        from conftest import make_tiny_model_dir

        teacher = make_tiny_model_dir(tmp_path / "teacher")
        task_section = {"name": task, "data_dir": str(data / "glue"), "max_length": 32}
    recipe = {"name": "emb", "output_dir": str(tmp_path / "runs" / "{name}"), "cache_dir": str(tmp_path / "cache"),
              "task": task_section, "teacher": {"model": str(teacher)}, "students": students,
              "measure": {"latency_sentences": 4, "throughput_sentences": 16, "rounds": 1, "warmup": 0},
              "final": {"rule": "fastest", "min_retention": 0.01}}
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """The tiny run with one static sentence student -> (config, record, run dir)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    tmp = tmp_path_factory.mktemp("static_embed")
    cfg = load_recipe(_recipe(tmp, [STATIC]))
    record = run(cfg)
    return cfg, record, Path(cfg.output_dir.replace("{name}", cfg.name))


def test_the_student_is_trained_kept_on_the_holdout_and_measured_beside_the_teacher(finished) -> None:
    cfg, record, run_dir = finished
    stages = {s.name: s for s in record.stages}
    assert set(stages) == {"teacher", "static"}
    for stage in stages.values():
        assert {"spearman", "ndcg_at_10", "spearman_holdout"} <= set(stage.metrics), stage.name
    student = stages["static"]
    assert student.shape["arch"] == "static_sentence" and student.shape["dims"] == WIDTH
    log = [json.loads(line) for line in (run_dir / "logs" / "train.jsonl").read_text().splitlines()]
    evals = [e for e in log if e.get("stage") == "static" and "spearman_holdout" in json.dumps(e)]
    assert evals, "the student was never judged on the held-out split"
    resolved = yaml.safe_load(dump_resolved(cfg))["students"][0]["family"]["static"]
    assert (resolved["tokens"], resolved["weighting"]) == ("all", "zipf")  # the sentence arch's defaults, written
    assert load_recipe(_recipe_from(run_dir, cfg)).students[0].family.static == cfg.students[0].family.static


def _recipe_from(run_dir: Path, cfg) -> Path:
    path = run_dir.parent / "resolved.yaml"
    path.write_text(dump_resolved(cfg), encoding="utf-8")
    return path


def test_training_brings_the_students_vectors_to_the_teachers_on_unseen_texts(finished) -> None:
    from tinyplm.models.classic.static_init import sentence_piece_vectors
    from tinyplm.models.classic.static_sentence import encode_static, static_sentence_student
    from tinyplm.models.embedder import load_embedder

    cfg, _, run_dir = finished
    data = Path(cfg.task.data_dir)
    rows = (data / "glue" / "STS-B" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
    texts = sorted({c for r in rows for c in r.split("\t")[7:9]})
    teacher = load_embedder(Path(cfg.teacher.model))
    student = load_embedder(run_dir / "students" / "static")
    tok = student.tokenizer
    untrained = static_sentence_student(lambda ids: sentence_piece_vectors(teacher.model, tok, ids), tok, WIDTH,
                                        "zipf", range(len(tok)), None, True)
    target = teacher.embed(texts)
    before, after = encode_static(untrained, tok, texts) @ target.T, student.embed(texts) @ target.T  # cosines
    own = np.eye(len(texts), dtype=bool)
    # a table as wide as the teacher trains without a projection: its vectors come into the teacher's space
    # (PCA had centred and rotated them out of it) ...
    assert np.diag(after).mean() > np.diag(before).mean() + 0.3
    # ... each text's nearer its own teacher vector than the others' (the rows were the texts' own)
    assert after[own].mean() > after[~own].mean()


def test_the_saved_student_loads_for_the_head_and_in_sentence_transformers_with_the_same_vectors(finished) -> None:
    import torch
    from sentence_transformers import SentenceTransformer

    from tinyplm.models.classic.static_sentence import StaticSentenceEncoder, encode_static
    from tinyplm.models.head_loading import load_for_head
    from tinyplm.tasks.heads import Head

    cfg, record, run_dir = finished
    folder = run_dir / "students" / "static"
    model, tok = load_for_head(folder, (), False, Head.EMBEDDING)
    assert isinstance(model, StaticSentenceEncoder)
    texts = ["the movie was good", "a dull plot", "film", ""]
    ours = encode_static(model, tok, texts)
    theirs = SentenceTransformer(str(folder), device="cpu").encode(texts, convert_to_numpy=True)
    full = [t for t in range(len(texts)) if texts[t]]
    assert np.all(np.sum(ours[full] * theirs[full], axis=1) >= 0.999)
    # the forward on the teacher's encoding ([CLS] .. [SEP]) gives the saved model's vectors
    enc = tok(texts[:3], padding=True, return_tensors="pt")
    with torch.no_grad():
        forward = model(enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids")).numpy()
    np.testing.assert_allclose(forward, ours[:3], atol=1e-5)
    # the run scored the model it saved: its STS-B figure is the saved model's, as `tinyplm embed-eval` computes it
    from tinyplm.evaluate.embed_suite import read_sets, score_sets, standard_sets
    from tinyplm.models.embedder import load_embedder

    sets = read_sets(standard_sets(cfg.task.data_dir, True, False))
    saved = score_sets(load_embedder(folder).embed, sets)[0].metrics["spearman"]
    assert {s.name: s for s in record.stages}["static"].metrics["spearman"] == pytest.approx(saved, abs=0.02)


@pytest.mark.skipif(not __import__("importlib.util").util.find_spec("model2vec"),
                    reason="model2vec is not installed: it is the benchmark extra's (pip install -e '.[benchmark]')")
def test_the_benchmark_measures_the_student_teacher_and_model2vec_on_the_run_dir(finished, tmp_path, capsys) -> None:
    import embed_static_vs_model2vec as bench

    cfg, _, run_dir = finished
    out = tmp_path / "bench.json"
    assert bench.main([str(run_dir), "--data-dir", cfg.task.data_dir, "--pca-dims", "16", "--rounds", "2",
                       "--throughput-sentences", "16", "--out", str(out)]) == out
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(out)
    result = json.loads(out.read_text())
    names = [m["name"] for m in result["models"]]
    assert names == ["teacher", "static", "model2vec"]
    for m in result["models"]:
        assert -100 <= m["stsb"]["spearman"] <= 100 and 0 <= m["squad"]["ndcg_at_10"] <= 100
        assert m["sentences_per_s"] > 0 and len(m["rounds_sentences_per_s"]) == 2
    assert result["cpu"]["kind"] in ("amx", "avx512_vnni", "avx2", "other")


@pytest.mark.parametrize(("family", "message"), [
    ({"arch": "static_sentence", "static": {"hidden": 8}}, "family.static.hidden is for arch static / static_cnn"),
    ({"arch": "static_sentence", "static": {"word_dropout": 0.1}},
     "family.static.word_dropout is for arch static / static_cnn / static_bilstm, not static_sentence"),
    ({"arch": "static_sentence", "hidden": 64}, "family.hidden is the classifier LSTM's; a static_sentence"),
])
def test_options_a_sentence_student_has_not_are_refused_naming_them(tmp_path, family, message) -> None:
    with pytest.raises(RecipeError, match=message):
        load_recipe(_recipe(tmp_path, [{**STATIC, "family": family}]))


@pytest.mark.parametrize(("change", "message"), [
    ({"objective": {"kd_weight": 1.0}}, r"objective: a 'static_sentence' student learns the teacher's sentence "
                                        r"vectors only \(no vector term given\)"),
    ({"objective": {"vector_cosine": 1.0, "hard_weight": 1.0}}, r"\(hard_weight given\)"),
    ({"compress": [{"kind": "runtime"}]}, "takes no compress steps .*family.static.table_dtype"),
])
def test_a_sentence_student_asking_for_a_classifiers_training_is_refused(tmp_path, change, message) -> None:
    with pytest.raises(RecipeError, match=message):
        load_recipe(_recipe(tmp_path, [{**STATIC, **change}]))


def test_a_sentence_student_on_a_classifier_task_and_a_classifier_on_the_embedding_task_are_refused(tmp_path):
    from tinyplm.run.preflight import preflight

    cfg = load_recipe(_recipe(tmp_path / "a", [STATIC], task="sst2"))
    with pytest.raises(RecipeError, match="student static: family.arch static_sentence makes sentence vectors "
                                          "\\(the embedding task\\); task sst2 has the sequence head"):
        preflight(cfg)
    lstm = {"name": "lstm", "family": {"arch": "static"}, "objective": {"kd_weight": 1.0}}
    cfg = load_recipe(_recipe(tmp_path / "b", [lstm]))
    with pytest.raises(RecipeError, match="student lstm: family.arch static is a classifier; task embedding has the "
                                          "embedding head, whose classic archs are static_sentence"):
        preflight(cfg)
