"""Classic students in a tiny run: TF-IDF, a BiLSTM over GloVe trained alone and distilled
(logit MSE) from the teacher, and a feature-based BiLSTM; trained by the one loop, saved, scored
and timed beside the teacher, and reused on resume. Recipe errors for classic students."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import tinyplm.distill.cache as cache_mod
from conftest import (
    TINY_TRAIN,
    make_tiny_glue,
    make_tiny_mlm_dir,
    make_tiny_model_dir,
    tiny_recipe,
    write_recipe,
    write_tiny_corpus,
)
from helpers_cli import cli
from tinyplm.config import load_recipe
from tinyplm.errors import DataError, ModelError, RecipeError
from tinyplm.models import load_classifier
from tinyplm.report.info import StageInfo
from tinyplm.run import run

pytestmark = pytest.mark.slow

SHORT = {**TINY_TRAIN, "max_steps": 6, "lr": 1e-2}


def _students() -> list[dict]:
    bilstm = {"arch": "bilstm", "hidden": 8, "vocab_size": 100,
              "embeddings": {"kind": "glove", "dim": 8, "window": 2, "min_count": 1, "epochs": 2}}
    return [
        {"name": "tfidf", "family": {"arch": "tfidf_lr"}},
        {"name": "bilstm-alone", "family": bilstm, "objective": {"kd_weight": 0, "hard_weight": 1}, "train": SHORT},
        {"name": "bilstm-kd", "family": bilstm, "objective": {"kd_weight": 0, "logit_mse": 1}, "train": SHORT},
        {"name": "bilstm-kd-aug", "family": bilstm,
         "stages": [{"data": "augmented", "objective": {"kd_weight": 0, "logit_mse": 1}, "train": SHORT}]},
        {"name": "elmo", "family": {"arch": "elmo_bilstm", "hidden": 4, "bilm": {
            "hidden": 8, "char_dim": 4, "filters": [[1, 4], [2, 4]], "max_chars": 8, "vocab_size": 40, "holdout": 0.2,
            "train": {**SHORT, "max_steps": 4}}}, "objective": {"kd_weight": 0, "hard_weight": 1}, "train": SHORT},
        {"name": "features", "family": {"arch": "feature_bilstm", "hidden": 8, "feature_layers": 2},
         "objective": {"kd_weight": 0, "hard_weight": 1}, "train": {**SHORT, "max_steps": 2}},
    ]


def _other_vocab(path: Path) -> Path:
    """A tiny BERT dir whose config says 120 word pieces (the run's teacher has 99)."""
    make_tiny_model_dir(path)
    cfg = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**cfg, "vocab_size": 120}))
    return path


def _recipe(tmp_path: Path) -> Path:
    model = make_tiny_model_dir(tmp_path / "tiny-bert")
    glue = make_tiny_glue(tmp_path / "glue", n_train=64, n_dev=32)
    recipe = tiny_recipe(tmp_path, model, glue, students=_students())
    recipe["teacher"]["finetune"]["max_steps"] = 4
    recipe["corpus"] = {"paths": [str(write_tiny_corpus(tmp_path / "corpus"))]}
    recipe["augment"] = {"mlm": str(make_tiny_mlm_dir(tmp_path / "mlm")), "copies": 2, "max_examples": 20}
    return write_recipe(tmp_path / "r.yaml", recipe)


def test_family_students_run_beside_the_teacher(tmp_path: Path, monkeypatch) -> None:
    cfg = load_recipe(_recipe(tmp_path))
    teacher_rows, predict = [], cache_mod.predict_logits

    def counted(model, enc, **kw):
        teacher_rows.append(len(enc))
        return predict(model, enc, **kw)

    monkeypatch.setattr(cache_mod, "predict_logits", counted)
    record = run(cfg)
    run_dir = Path(cfg.output_dir)
    stages = {s.name: s for s in record.stages}
    assert set(stages) == {"teacher", "tfidf", "bilstm-alone", "bilstm-kd", "bilstm-kd-aug", "elmo", "features"}
    for name in ("tfidf", "bilstm-alone", "bilstm-kd", "elmo", "features"):
        s = stages[name]
        assert s.shape["arch"] == cfg.students[[x.name for x in cfg.students].index(name)].family.arch
        assert s.throughput_sent_per_s > 0 and s.latency_ms_p50_b1 > 0 and s.disk_bytes > 0 and s.params > 0
        assert 0.0 <= s.metrics["accuracy"] <= 1.0
        model, tok = load_classifier(run_dir / s.model_dir, ("0", "1"), False, "sequence")
        assert model.config.tinyplm_task["name"] == "sst2"
    kd = stages["bilstm-kd"].info.training[0]
    assert kd.objective == {"logit_mse": 1.0} and kd.steps == 6
    assert stages["bilstm-alone"].info.classic.vectors.kind == "glove"
    aug = stages["bilstm-kd-aug"].info.training[0]  # 20 originals + 2 copies each, the other 44 once
    assert aug.data == "augmented" and aug.examples == 20 * 3 + 44
    # the teacher ran on the 64 training examples, then on the 40 copies only: the 64 again are known
    assert teacher_rows[0] == 64 and 0 < sum(teacher_rows[1:]) <= 40
    assert stages["bilstm-kd"].info.classic.vectors.cached  # the second BiLSTM reuses the GloVe vectors
    assert stages["tfidf"].info.classic.features > 10
    trained = {n: (stages[n].info.training[0].trainable_params, stages[n].info.training[0].total_params)
               for n in ("tfidf", "bilstm-kd", "elmo", "features")}  # the report's Trained (M) column
    assert trained["tfidf"][0] == trained["tfidf"][1] > 0 and trained["bilstm-kd"][0] > 0
    assert 0 < trained["features"][0] < trained["features"][1]  # the encoder stays frozen
    assert 0 < trained["elmo"][0] < trained["elmo"][1]  # so does the biLM
    bilm = stages["elmo"].info.classic.bilm
    assert bilm.steps == 4 and bilm.perplexity > 1 and bilm.unigram_perplexity > 1
    assert len(list((tmp_path / "cache" / "family").glob("bilm-*/bilm.safetensors"))) == 1
    logged = {json.loads(line)["stage"] for line in (run_dir / "logs" / "train.jsonl").read_text().splitlines()}
    assert {"bilstm-alone", "bilstm-kd", "bilm", "elmo", "features"} <= logged
    for name in ("tfidf", "bilstm-kd", "elmo"):  # tinyplm evaluate scores a saved classic model as the run did
        got = cli(["evaluate", run_dir / stages[name].model_dir, "--task", "sst2", "--data-dir", tmp_path / "glue",
                   "--max-length", "32", "--json"], cwd=tmp_path)
        assert got.returncode == 0, got.output
        assert json.loads(got.stdout)["metrics"]["accuracy"] == pytest.approx(stages[name].metrics["accuracy"])
    got = cli(["bench", run_dir / "students" / "bilstm-kd", "--task", "sst2", "--data-dir", tmp_path / "glue",
               "--max-length", "32", "--rounds", "1", "--runtimes", "torch,onnxruntime", "--out", tmp_path / "bench"],
              cwd=tmp_path)
    assert got.returncode == 0, got.output  # the BiLSTM as saved and as an ONNX Runtime graph, side by side
    assert "teacher@onnxruntime" in got.output  # bench names its first model teacher
    got = cli(["bench", run_dir / "teacher", run_dir / "students" / "bilstm-kd", run_dir / "students" / "tfidf",
               "--task", "sst2", "--data-dir", tmp_path / "glue", "--max-length", "32", "--rounds", "1",
               "--out", tmp_path / "bench-side"], cwd=tmp_path)
    assert got.returncode == 0, got.output  # word-level models beside the word-piece teacher, each on its own ids
    benched = {s["name"]: s for s in json.loads((tmp_path / "bench-side" / "results.json").read_text())["stages"]}
    for name in ("bilstm-kd", "tfidf"):
        assert benched[name]["metrics"]["accuracy"] == pytest.approx(stages[name].metrics["accuracy"])
        assert benched[name]["throughput_sent_per_s"] > 0
    (run_dir / "results.json").unlink()  # as if the run died while measuring
    again = run(cfg, resume=True)  # finished students are reloaded, not trained again
    assert all(again.stage(n).info.reused for n in ("tfidf", "bilstm-kd"))
    for n in ("tfidf", "bilstm-kd"):  # reported as the run that made them did (as results.json holds it)
        assert replace(again.stage(n).info, reused=False) == \
            StageInfo.from_dict(json.loads(json.dumps(stages[n].info.to_dict())))


@pytest.mark.parametrize(("student", "message"), [
    ({"family": {"arch": "bilstm"}, "shape": {"layers": 1, "hidden": 8, "heads": 2, "ffn": 8}}, "drop 'shape'"),
    ({"family": {"arch": "tfidf_lr"}, "train": {"epochs": 1}}, "fitted by scikit-learn"),
    ({"family": {"arch": "bilstm"}, "objective": {"kd_weight": 0, "hidden": 1}}, "labels and the teacher's logits"),
    ({"family": {"arch": "tfidf_lr", "pooling": "mean", "embeddings": {"kind": "glove"}}}, "family.embeddings is for"),
    ({"family": {"arch": "bilstm", "embeddings": {"kind": "word2vec"}}}, "give family.embeddings.corpus"),
    ({"family": {"arch": "elmo_bilstm"}}, "give family.bilm.corpus"),
])
def test_family_recipe_errors(tmp_path: Path, student: dict, message: str) -> None:
    recipe = tiny_recipe(tmp_path, tmp_path, tmp_path, students=[{"name": "s", **student}])
    with pytest.raises(RecipeError, match=message):
        load_recipe(write_recipe(tmp_path / "r.yaml", recipe))


@pytest.mark.parametrize(("change", "error", "message"), [
    (lambda r, tmp: r["augment"].update(mlm=str(tmp / "no-mlm")), ModelError, "augment.mlm: .*no-mlm"),
    (lambda r, tmp: r["augment"].update(mlm=r["teacher"]["model"]), ModelError,
     "augment.mlm: .* has no masked-LM head"),
    (lambda r, tmp: r["students"][1]["family"]["embeddings"].update(corpus=[str(tmp / "nowhere")]), DataError,
     r"student bilstm-alone: family.embeddings.corpus: .*nowhere: corpus file or directory not found"),
    (lambda r, tmp: r["corpus"].update(paths=[str(tmp / "empty")]) or (tmp / "empty").mkdir(), DataError,
     r"student bilstm-alone: corpus.paths: .*empty: directory holds no .txt files"),
    # vocabulary settings nothing reaches: a library traceback after the teacher, or a student of [UNK] only
    (lambda r, tmp: r["students"][0]["family"].update(tfidf={"min_df": 1000}), RecipeError,
     "student tfidf: family.tfidf.min_df 1000 is more than the 64 training texts"),
    (lambda r, tmp: r["students"][1]["family"].update(min_count=100000), RecipeError,
     r"student bilstm-alone: family.min_count 100000 keeps no word of the 64 training texts .*\[UNK\]"),
    (lambda r, tmp: r["students"][1]["family"]["embeddings"].update(min_count=100000), RecipeError,
     r"student bilstm-alone: family.embeddings.min_count 100000 keeps no word of the \d+ corpus texts"),
    (lambda r, tmp: r["students"][1]["family"]["embeddings"].update(corpus=[str(tmp / "e.txt")])
     or (tmp / "e.txt").write_text(" \n"), DataError,
     r"student bilstm-alone: family.embeddings.corpus: .*e.txt: no text items"),
    (lambda r, tmp: r["students"][4]["family"]["bilm"].update(model=str(tmp)), ModelError,
     "student elmo: family.bilm.model: .* holds no bilm.safetensors"),
    (lambda r, tmp: r["students"][5]["family"].update(feature_layers=3), RecipeError,
     "student features: family.feature_layers 3 is more than the 2 layers of the encoder"),
    (lambda r, tmp: r["students"][5]["family"].update(encoder=str(tmp / "nowhere")), ModelError,
     "student features: family.encoder: .*nowhere: model directory not found"),
    (lambda r, tmp: r["students"][5]["family"].update(encoder=str(_other_vocab(tmp / "other"))), ModelError,
     "student features: family.encoder: .*other has a vocabulary of 120 word pieces, the teacher's tokenizer 99"),
    (lambda r, tmp: r["students"][3]["stages"][0].update(teacher=str(_other_vocab(tmp / "other"))), ModelError,
     "student bilstm-kd-aug, stage 0: teacher .*other has a vocabulary of 120 word pieces, the teacher's tokenizer "
     "99; a stage teacher must share the tokenizer"),
])
def test_what_family_students_read_is_checked_before_the_teacher_trains(tmp_path: Path, change, error,
                                                                        message: str) -> None:
    import yaml

    path = _recipe(tmp_path)
    recipe = yaml.safe_load(path.read_text())
    change(recipe, tmp_path)
    cfg = load_recipe(write_recipe(path, recipe))
    with pytest.raises(error, match=message):
        run(cfg)
    assert not (tmp_path / "runs").exists()  # refused by preflight: nothing written, no teacher trained


def test_a_students_own_corpus_may_be_a_table_with_its_own_text_field(tmp_path: Path) -> None:
    """family.embeddings.corpus of a JSON-lines file was refused with "name the field (corpus.text_field
    ...)", a key that does not reach a student's own corpus: it had no way to be read."""
    import yaml

    from tinyplm.run.preflight import preflight

    table = tmp_path / "reviews.jsonl"
    table.write_text("".join(json.dumps({"id": i, "t": f"a review of the film number {i} and its plot"}) + "\n"
                             for i in range(30)), encoding="utf-8")
    path = _recipe(tmp_path)
    recipe = yaml.safe_load(path.read_text())
    recipe["students"][1]["family"]["embeddings"].update(corpus=[str(table)], text_field="t", min_count=31)
    with pytest.raises(RecipeError, match=r"family.embeddings.min_count 31 keeps no word of the 30 corpus texts .*"
                                          r"reviews.jsonl \(the most frequent is seen 30 times\)"):
        preflight(load_recipe(write_recipe(path, recipe)))  # the column was read: "review" is in every row
    recipe["students"][1]["family"]["embeddings"]["min_count"] = 1
    preflight(load_recipe(write_recipe(path, recipe)))
    del recipe["students"][1]["family"]["embeddings"]["corpus"]
    with pytest.raises(RecipeError, match="family.embeddings.text_field names the text column of "
                                          "family.embeddings.corpus's tables; give that corpus too"):
        load_recipe(write_recipe(path, recipe))


def test_a_family_student_on_a_regression_task_is_refused_before_the_teacher_trains(tmp_path: Path) -> None:
    rows = "text,score\n" + "".join(f"sentence number {i} here,{i % 5}.0\n" for i in range(12))
    for name in ("train.csv", "dev.csv"):
        (tmp_path / name).write_text(rows, encoding="utf-8")
    recipe = tiny_recipe(tmp_path, make_tiny_model_dir(tmp_path / "tiny-bert"), tmp_path,
                         students=[{"name": "tfidf", "family": {"arch": "tfidf_lr"}}])
    recipe["task"] = {"name": "custom", "train_file": str(tmp_path / "train.csv"),
                      "dev_file": str(tmp_path / "dev.csv"), "text_column": "text", "label_column": "score",
                      "regression": True, "max_length": 32}
    cfg = load_recipe(write_recipe(tmp_path / "r.yaml", recipe))
    with pytest.raises(RecipeError, match="student tfidf: classic students classify sentences; .* is regression"):
        run(cfg)
    assert not (tmp_path / "runs").exists()


def test_a_tvtropes_run_with_page_context_trains_scores_and_stamps_it(tmp_path: Path) -> None:
    """task.context_sentences / context_after on TV Tropes: the teacher and the TF-IDF floor read
    each sentence with the two before it and the one after; the saved teacher carries the settings,
    so `tinyplm evaluate` with no options scores it as the run did."""
    from tinyplm.tasks.spoilers import TVTROPES_DIR

    root = tmp_path / "data"
    (root / TVTROPES_DIR).mkdir(parents=True)
    for split, n in (("train", 64), ("dev", 32)):
        rows = [f"{i},Line {i} of the page of show {i // 8} where {'he dies' if (i // 4) % 2 else 'all is well'},"
                f"{(i // 4) % 2}" for i in range(1, n + 1)]
        (root / TVTROPES_DIR / f"{split}.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    model = make_tiny_model_dir(tmp_path / "tiny-bert")
    kd_aug = {"name": "bilstm-kd-aug", "family": {"arch": "bilstm", "hidden": 8, "vocab_size": 100},
              "stages": [{"data": "augmented", "objective": {"kd_weight": 0, "logit_mse": 1}, "train": SHORT}]}
    tfidf = {"name": "tfidf", "family": {"arch": "tfidf_lr"}}
    recipe = tiny_recipe(tmp_path, model, tmp_path, students=[tfidf, kd_aug])
    recipe["task"] = {"name": "tvtropes_spoilers", "data_dir": str(root), "max_length": 48, "context_sentences": 2,
                      "context_after": 1}
    recipe["teacher"]["finetune"]["max_steps"] = 4
    recipe["augment"] = {"mlm": str(make_tiny_mlm_dir(tmp_path / "mlm")), "copies": 2, "max_examples": 8, "p": 1.0}
    cfg = load_recipe(write_recipe(tmp_path / "r.yaml", recipe))
    record = run(cfg)
    run_dir = Path(cfg.output_dir)
    assert {s.name for s in record.stages} == {"teacher", "tfidf", "bilstm-kd-aug"}
    # augment.pair is auto: the copies vary the sentence and keep the page context around it
    (cached,) = (tmp_path / "cache" / "augment").glob("*.jsonl")
    rows = [json.loads(line) for line in cached.read_text().splitlines()[1:]]
    originals, copies = rows[:8], rows[8:]
    assert len(copies) == 16 and all(c["text_pair"] == originals[j // 2]["text_pair"] for j, c in enumerate(copies))
    assert any(c["text"] != originals[j // 2]["text"] for j, c in enumerate(copies))
    teacher, _ = load_classifier(run_dir / "teacher", ("0", "1"), False, "sequence")
    assert teacher.config.tinyplm_task == {"name": "tvtropes_spoilers", "max_length": 48, "context_sentences": 2,
                                           "context_after": 1}
    got = cli(["evaluate", run_dir / "teacher", "--task", "tvtropes_spoilers", "--data-dir", root, "--json"],
              cwd=tmp_path)
    assert got.returncode == 0, got.output
    scored = json.loads(got.stdout)
    assert (scored["context_sentences"], scored["context_after"]) == (2, 1)
    assert scored["metrics"]["roc_auc"] == pytest.approx(record.stage("teacher").metrics["roc_auc"])
    alone = cli(["evaluate", run_dir / "teacher", "--task", "tvtropes_spoilers", "--data-dir", root,
                 "--context-sentences", "0", "--json"], cwd=tmp_path)
    assert json.loads(alone.stdout)["metrics"] != scored["metrics"]  # the context is what it was scored on
