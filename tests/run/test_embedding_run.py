"""The embedding task end to end in a tiny world: a tiny sentence-transformers teacher, STS-B and
SQuAD in the official layouts, a layer student and a student of another checkpoint distilled on the
teacher's vectors, pruned and trimmed, every stage measured on Spearman and nDCG@10 beside the
teacher; the saved stages load in sentence-transformers with the vectors tinyplm gives."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import yaml

from helpers_doc_world import write_tiny_data
from helpers_embedding import make_sentence_dir
from tinyplm.config import load_recipe
from tinyplm.errors import RecipeError
from tinyplm.run import run

pytestmark = pytest.mark.slow

SHORT = {"epochs": 1, "max_steps": 6, "batch_size": 8, "lr": 1e-3, "eval_every": 3, "checkpoint_every": 3,
         "weight_decay": 0.0}


def _recipe(tmp_path: Path, students: list[dict], corpus: list[str] | None = None, **task) -> Path:
    data = tmp_path / "data"
    write_tiny_data(data)
    teacher = make_sentence_dir(tmp_path / "teacher")
    extra = {}
    if corpus:
        (tmp_path / "corpus.txt").write_text("\n\n".join(corpus) + "\n", encoding="utf-8")
        extra["corpus"] = {"paths": [str(tmp_path / "corpus.txt")]}
    recipe = {**extra, "name": "emb", "output_dir": str(tmp_path / "runs" / "{name}"),
              "cache_dir": str(tmp_path / "cache"),
              "task": {"name": "embedding", "data_dir": str(data), "max_length": 32, "eval_max_length": 48,
                       "holdout": 8, **task},
              "teacher": {"model": str(teacher)}, "students": students,
              "measure": {"latency_sentences": 4, "throughput_sentences": 16, "rounds": 1, "warmup": 0},
              "final": {"rule": "fastest", "min_retention": 0.5}}
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    return path


def test_layer_student_pruned_and_trimmed_is_measured_on_embedding_metrics(tmp_path: Path) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    students = [{"name": "student-L1", "teacher_layers": [1], "objective": {"vector_mse": 16.0, "similarity_kd": 1.0},
                 "train": SHORT,
                 "compress": [{"kind": "prune_heads", "keep": 0.5}, {"kind": "trim_vocab"}]}]
    passages = [" ".join(f"The {w} movie number {k} was good." for k in range(4)) for w in ("good", "bad", "new")]
    cfg = load_recipe(_recipe(tmp_path, students, corpus=passages, train_texts=["stsb", "paragraphs"],
                              holdout_passages=2))
    record = run(cfg)
    stages = {s.name: s for s in record.stages}
    assert set(stages) == {"teacher", "student-L1", "student-L1.prune_heads", "student-L1.trim_vocab"}
    assert record.info.guard_metrics == ["ndcg_at_10_holdout_passages"]
    assert "ndcg_at_10_holdout_passages" in record.info.final_rule
    for stage in stages.values():
        assert {"spearman", "ndcg_at_10", "spearman_holdout", "ndcg_at_10_holdout_passages"} <= set(stage.metrics)
        assert -100 <= stage.metrics["spearman"] <= 100 and 0 <= stage.metrics["ndcg_at_10"] <= 100
    run_dir = Path(cfg.output_dir.replace("{name}", cfg.name))
    assert (run_dir / "model" / "modules.json").is_file()
    results = json.loads((run_dir / "results.json").read_text())
    assert results["metric"] == "spearman"


def test_student_of_another_checkpoint_reads_its_own_tokenizer(tmp_path: Path) -> None:
    """A student started from another sentence model (here a tiny one of other weights and a
    tokenizer that splits otherwise) learns the teacher's vectors on its own token ids: the targets
    are vectors, so no token alignment is needed. It keeps half of its start (``keep_start``): its
    own vectors, another width than the teacher's, go beside the teacher's as targets. It is judged
    and saved comparing vectors as the teacher does."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from conftest import tiny_vocab
    from tinyplm.models.pooling import Pooling, PoolMode, SentenceLayout
    from tinyplm.models.sentence import SentenceEncoder, save_sentence_encoder

    vocab = [t for t in tiny_vocab() if t != "movie"]  # "movie" becomes [UNK]: other ids than the teacher's
    tok = BertTokenizerFast(vocab={t: i for i, t in enumerate(vocab)}, do_lower_case=True)
    encoder = BertModel(BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                   intermediate_size=24, max_position_embeddings=64))
    other = save_sentence_encoder(SentenceEncoder(encoder, SentenceLayout(Pooling(PoolMode.CLS), normalize=False)),
                                  tok, tmp_path / "other")
    students = [{"name": "other", "init_from": str(other), "train": SHORT,
                 "objective": {"vector_cosine": 1.0, "similarity_kd": 1.0, "keep_start": 0.5}}]
    cfg = load_recipe(_recipe(tmp_path, students))
    settings = tmp_path / "teacher" / "config_sentence_transformers.json"  # compared by dot products
    settings.write_text(json.dumps({**json.loads(settings.read_text()), "similarity_fn_name": "dot"}))
    record = run(cfg)
    student = next(s for s in record.stages if s.name == "other")
    assert {"spearman", "ndcg_at_10"} <= set(student.metrics)
    # judged by the teacher's dot products, and saved saying so (it was saved with its start's cosine)
    assert "compared by the teacher's dot, not its own cosine" in student.info.init
    assert student.info.training[0].objective["keep_start"] == 0.5  # its own start vectors beside the teacher's
    saved = Path(cfg.output_dir.replace("{name}", cfg.name)) / "students" / "other"
    assert json.loads((saved / "1_Pooling" / "config.json").read_text())["pooling_mode_cls_token"] is True
    assert "movie" not in json.loads((saved / "tokenizer.json").read_text())["model"]["vocab"]
    assert json.loads((saved / "config_sentence_transformers.json").read_text())["similarity_fn_name"] == "dot"


@pytest.mark.parametrize(("student", "message"), [
    ({"teacher_layers": [1], "objective": {"kd_weight": 1.0}}, "has kd_weight"),
    ({"teacher_layers": [1], "objective": {"vector_mse": 1.0, "hidden": 1.0}}, "has hidden"),
    ({"teacher_layers": [1], "objective": {"vector_mse": 1.0},
      "compress": [{"kind": "prune_ffn", "keep": 0.5, "recover": {"objective": {"hard_weight": 1.0}}}]},
     "recovery of compress step prune_ffn: has hard_weight"),
])
def test_a_term_the_embedding_head_cannot_train_is_refused_before_any_work(tmp_path: Path, student: dict,
                                                                            message: str) -> None:
    cfg = load_recipe(_recipe(tmp_path, [{"name": "s", "train": SHORT, **student}]))
    with pytest.raises(RecipeError, match=message):
        run(cfg)
    assert not Path(cfg.output_dir.replace("{name}", cfg.name)).exists()


def test_a_teacher_without_a_sentence_layout_is_refused(tmp_path: Path) -> None:
    from conftest import make_tiny_model_dir
    from tinyplm.errors import ModelError

    path = _recipe(tmp_path, [{"name": "s", "teacher_layers": [1], "objective": {"vector_mse": 1.0}, "train": SHORT}])
    recipe = yaml.safe_load(path.read_text())
    recipe["teacher"]["model"] = str(make_tiny_model_dir(tmp_path / "plain"))
    path.write_text(yaml.safe_dump(recipe))
    with pytest.raises(ModelError, match="sentence-embedding model"):
        run(load_recipe(path))


def test_vector_terms_on_a_classifier_task_are_refused(tmp_path: Path) -> None:
    path = _recipe(tmp_path, [{"name": "s", "teacher_layers": [1], "objective": {"vector_mse": 1.0}, "train": SHORT}])
    recipe = yaml.safe_load(path.read_text())
    recipe["task"] = {"name": "sst2", "data_dir": recipe["task"]["data_dir"], "max_length": 32}
    from conftest import make_tiny_model_dir

    recipe["teacher"]["model"] = str(make_tiny_model_dir(tmp_path / "clf"))
    path.write_text(yaml.safe_dump(recipe))
    with pytest.raises(RecipeError, match="embedding task's terms"):
        run(load_recipe(path))


def test_final_runtime_form_loads_in_sentence_transformers_with_its_float_weights(tmp_path: Path) -> None:
    """The final model of an embedding run on its int8 runtime: tinyplm runs the graph it measured,
    and SentenceTransformer(model/) loads the float weights the graph was made from (kept beside it,
    as sentence-transformers' own folders keep model.safetensors beside onnx/), giving the vectors
    tinyplm's PyTorch form of that stage gives."""
    from sentence_transformers import SentenceTransformer

    from tinyplm.models.embedder import load_embedder
    from tinyplm.models.head_loading import load_for_head
    from tinyplm.models.sentence import encode_texts
    from tinyplm.tasks.heads import Head

    students = [{"name": "s", "teacher_layers": [1], "objective": {"vector_cosine": 1.0}, "train": SHORT,
                 "compress": [{"kind": "trim_vocab"},
                              {"kind": "runtime", "runtime": "fastest", "candidates": ["onnx_dynamic_int8"]}]}]
    cfg = load_recipe(_recipe(tmp_path, students, eval_max_length=40))  # the teacher's layout says 48
    record = run(cfg)
    assert record.info.final_model == "s.runtime"
    run_dir = Path(cfg.output_dir.replace("{name}", cfg.name))
    model_dir = run_dir / "model"
    assert (model_dir / "model.onnx").is_file() and (model_dir / "model.safetensors").is_file()
    from tinyplm.errors import TinyplmError
    from tinyplm.run.export import export_run

    with pytest.raises(TinyplmError, match=r"its models output vectors .*runtime step"):
        export_run(run_dir)  # before: a logits graph of the bare encoder written, then a crash
    assert not (run_dir / "export").exists()
    texts = ["a good movie", "the plot was not great at all", "actor"]
    parent, tok = load_for_head(run_dir / "students" / "s.trim_vocab", (), False, Head.EMBEDDING)
    torch_vectors = encode_texts(parent, tok, texts)
    loaded = SentenceTransformer(str(model_dir), device="cpu")
    st_vectors = loaded.encode(texts)
    # every stage was measured reading task.eval_max_length pieces, and says so to whoever loads it
    assert loaded.max_seq_length == 40
    for saved in (run_dir / "teacher", run_dir / "students" / "s", run_dir / "students" / "s.trim_vocab", model_dir):
        assert json.loads((saved / "sentence_bert_config.json").read_text())["max_seq_length"] == 40, saved
    norms = np.linalg.norm(st_vectors, axis=1) * np.linalg.norm(torch_vectors, axis=1)
    cos = (st_vectors * torch_vectors).sum(1) / norms
    assert cos.min() >= 0.999
    graph = load_embedder(model_dir)
    assert type(graph.model).__name__ == "OrtEmbedder"
    ran = graph.embed(texts)
    assert float((ran * st_vectors).sum(1).mean()) > 0.9  # int8 graph vs float weights: close, not equal
    card = (model_dir / "README.md").read_text(encoding="utf-8")
    assert "pipeline_tag: sentence-similarity" in card and "library_name: sentence-transformers" in card
    assert "SentenceTransformer(" in card and "load_classifier" not in card


def _into_subfolder(root: Path) -> None:
    """Move an ST folder's Transformer files into 0_Transformer/, as older sentence-transformers saved them."""
    import shutil

    sub = root / "0_Transformer"
    sub.mkdir()
    for file in list(root.iterdir()):
        if file.is_file() and file.name not in ("modules.json", "config_sentence_transformers.json", "README.md"):
            shutil.move(file, sub / file.name)
    modules = json.loads((root / "modules.json").read_text())
    modules[0]["path"] = "0_Transformer"
    (root / "modules.json").write_text(json.dumps(modules))


def test_a_teacher_with_its_transformer_in_a_subfolder_validates_and_runs(tmp_path: Path) -> None:
    """validate (preflight) reads the encoder where modules.json says, as loading does; it refused
    such a teacher for want of a config.json at its root."""
    from tinyplm.run.preflight import preflight

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    path = _recipe(tmp_path, [{"name": "s", "teacher_layers": [1], "objective": {"vector_mse": 1.0}, "train": SHORT}])
    _into_subfolder(tmp_path / "teacher")
    cfg = load_recipe(path)
    assert preflight(cfg).teacher_dir == tmp_path / "teacher"
    stages = {s.name: s for s in run(cfg).stages}
    assert set(stages) == {"teacher", "s"} and 0 <= stages["s"].metrics["ndcg_at_10"] <= 100


@pytest.mark.parametrize("subfolder", [False, True])
def test_a_layout_that_does_not_fit_its_encoder_is_refused_by_validate(tmp_path: Path, subfolder: bool) -> None:
    from tinyplm.errors import ModelError
    from tinyplm.run.preflight import preflight

    path = _recipe(tmp_path, [{"name": "s", "teacher_layers": [1], "objective": {"vector_mse": 1.0}, "train": SHORT}])
    pooling = tmp_path / "teacher" / "1_Pooling" / "config.json"
    pooling.write_text(json.dumps({**json.loads(pooling.read_text()), "word_embedding_dimension": 48}))
    if subfolder:
        _into_subfolder(tmp_path / "teacher")
    with pytest.raises(ModelError, match="pools vectors 48 wide .embedding_dimension, or word_embedding_dim.*hidden"):
        preflight(load_recipe(path))


def test_a_teacher_meant_for_dot_products_has_every_model_judged_by_them(tmp_path: Path) -> None:
    """preflight reads the teacher's similarity_fn_name into the task, and the embedding head's
    metrics compare vectors by it: vectors of unequal lengths read otherwise under dot products."""
    from tinyplm.evaluate.embedding import set_metrics
    from tinyplm.evaluate.model_eval import encode_evals, metrics_from_logits
    from tinyplm.evaluate.similarity import Similarity
    from tinyplm.run import preflight
    from tinyplm.tasks.retrieval import SET_OPTION

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    cfg = load_recipe(_recipe(tmp_path, [{"name": "student-L1", "teacher_layers": [1], "train": SHORT,
                                          "objective": {"vector_mse": 1.0}}]))
    assert preflight(cfg).data.similarity is None  # ST's default: cosine
    settings = tmp_path / "teacher" / "config_sentence_transformers.json"
    settings.write_text(json.dumps({**json.loads(settings.read_text()), "similarity_fn_name": "dot"}))
    checked = preflight(cfg)
    assert checked.data.similarity == "dot"
    evals = encode_evals(checked.data, checked.tokenizer, 48)
    rng = np.random.default_rng(0)
    vectors = {name: torch_tensor(rng.normal(size=(len(enc), 8)) * rng.uniform(0.1, 10, size=(len(enc), 1)))
               for name, enc in evals.items()}
    got = metrics_from_logits(checked.data, evals, vectors)
    split = checked.data.evals["stsb"]
    texts = [ex.text for ex in split.examples]
    by_dot = set_metrics(split.options[SET_OPTION], texts, vectors["stsb"].numpy(), Similarity.DOT)
    by_cosine = set_metrics(split.options[SET_OPTION], texts, vectors["stsb"].numpy())
    assert got["spearman"] == by_dot["spearman"] != by_cosine["spearman"]


def torch_tensor(values: np.ndarray):
    import torch

    return torch.tensor(values, dtype=torch.float32)


def test_an_eval_length_other_than_the_teachers_own_is_noted_before_the_run(tmp_path: Path) -> None:
    """The teacher's row is the retention baseline: read at another length than its own
    max_seq_length, it scores otherwise than embed-eval and sentence-transformers say; preflight
    (validate, and the run's log) says so and names the value that reads as they do."""
    from tinyplm.run.preflight import preflight

    notes = preflight(load_recipe(_recipe(tmp_path, [], eval_max_length=40))).notes
    assert len(notes) == 1 and "task.eval_max_length 40 reads the evaluation sets at 40 pieces" in notes[0]
    assert "set task.eval_max_length: 48" in notes[0]
    assert preflight(load_recipe(_recipe(tmp_path / "same", []))).notes == ()  # 48, as its layout says


def test_bench_reads_embedding_sets_at_the_models_own_length(tmp_path: Path) -> None:
    """bench --task embedding read every set at the task's default 256 pieces whatever --max-length or
    the models said: a 64-position encoder crashed, and a model of max_seq_length 48 scored otherwise
    than embed-eval. Now: --max-length (checked against each model's positions), else the least of
    the models' own limits."""
    from tinyplm.errors import TinyplmError
    from tinyplm.inference.model_info import embedding_window

    own = make_sentence_dir(tmp_path / "own")  # max_seq_length 48 over 64 positions
    past = make_sentence_dir(tmp_path / "past")
    settings = json.loads((past / "sentence_bert_config.json").read_text())
    (past / "sentence_bert_config.json").write_text(json.dumps({**settings, "max_seq_length": 128}))
    assert embedding_window(None, [own]) == 48
    assert embedding_window(None, [past]) == 64  # its max_seq_length cut to its positions
    assert embedding_window(None, [past, own]) == 48
    assert embedding_window(60, [own, past]) == 60
    with pytest.raises(TinyplmError, match="--max-length 100 is longer than the 64 positions of"):
        embedding_window(100, [own])


def test_a_tokenizer_limit_under_the_positions_is_the_models_own_length_everywhere(tmp_path: Path) -> None:
    """Without a max_seq_length, sentence-transformers (and embed-eval) cut texts at the tokenizer's
    model_max_length: bench's window and the run's note on task.eval_max_length read the same limit
    (bench read the encoder's positions, the note no cap but the table's)."""
    from tinyplm.inference.model_info import embedding_window
    from tinyplm.models.embedder import load_embedder
    from tinyplm.models.sentence import default_max_length
    from tinyplm.run.preflight import preflight

    model = make_sentence_dir(tmp_path / "own")  # 64 positions
    settings = json.loads((model / "sentence_bert_config.json").read_text())
    (model / "sentence_bert_config.json").write_text(json.dumps({**settings, "max_seq_length": None}))
    tok_cfg = json.loads((model / "tokenizer_config.json").read_text())
    (model / "tokenizer_config.json").write_text(json.dumps({**tok_cfg, "model_max_length": 40}))
    loaded = load_embedder(model)
    assert default_max_length(loaded.model, loaded.tokenizer) == 40 == embedding_window(None, [model])
    (model / "tokenizer_config.json").write_text(json.dumps({**tok_cfg, "model_max_length": 1e30}))
    assert embedding_window(None, [model]) == 64  # "no limit": the positions

    (model / "tokenizer_config.json").write_text(json.dumps({**tok_cfg, "model_max_length": 40}))
    recipe = _recipe(tmp_path, [], eval_max_length=48)
    raw = yaml.safe_load(recipe.read_text())
    raw["teacher"]["model"] = str(model)
    recipe.write_text(yaml.safe_dump(raw))
    notes = preflight(load_recipe(recipe)).notes
    assert len(notes) == 1 and "set task.eval_max_length: 40" in notes[0]


def test_the_run_reads_text_as_the_teachers_layout_says(tmp_path: Path) -> None:
    """A sentence model of the older form (a cased tokenizer, do_lower_case: true in
    sentence_bert_config.json) was read by embed-eval lower-cased and by a run as it was cased: the
    teacher's targets, every metric and the final choice came from text its model never reads so."""
    from tinyplm.run import preflight

    path = _recipe(tmp_path, [])
    teacher = tmp_path / "teacher"
    settings = teacher / "tokenizer_config.json"
    settings.write_text(json.dumps({**json.loads(settings.read_text()), "do_lower_case": False}))
    layout = teacher / "sentence_bert_config.json"
    layout.write_text(json.dumps({**json.loads(layout.read_text()), "do_lower_case": True}))
    checked = preflight(load_recipe(path))
    assert checked.tokenizer("The MOVIE")["input_ids"] == checked.tokenizer("the movie")["input_ids"]
    layout.write_text(json.dumps({**json.loads(layout.read_text()), "do_lower_case": False}))
    from tinyplm.run.read_once import reading_once

    with reading_once():  # read anew: without the layout's word the tokenizer keeps the case
        cased = preflight(load_recipe(path)).tokenizer
    assert cased("The MOVIE")["input_ids"] != cased("the movie")["input_ids"]
