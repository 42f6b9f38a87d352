"""A model that reads the teacher's encoding must share its token ids: checked on the tokenizers
themselves (not only the vocabulary size), before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import BertTokenizerFast

from conftest import make_tiny_glue, make_tiny_model_dir, tiny_recipe, tiny_vocab, write_recipe
from helpers_cli import cli
from tinyplm.models.token_ids import token_id_mismatch


def _tokenizer(vocab: list[str]) -> BertTokenizerFast:
    return BertTokenizerFast(vocab={t: i for i, t in enumerate(vocab)}, do_lower_case=True)


def _retokenized(path: Path, vocab: list[str]) -> Path:
    """A tiny model dir whose tokenizer is ``vocab`` (same size as the teacher's, other ids)."""
    make_tiny_model_dir(path)
    for name in ("tokenizer.json", "vocab.txt"):
        (path / name).unlink(missing_ok=True)
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    _tokenizer(vocab).save_pretrained(path)
    return path


def _shifted() -> list[str]:
    """The tiny vocabulary with its special tokens moved to the end, every other id shifted (as
    MPNet's ids are BERT's shifted by 4)."""
    vocab = tiny_vocab()
    special = [t for t in vocab if t.startswith("[")]
    return [t for t in vocab if not t.startswith("[")] + special


def _swapped() -> list[str]:
    """Two ordinary words of the tiny vocabulary trade ids; everything else equal."""
    vocab = tiny_vocab()
    words = [i for i, t in enumerate(vocab) if t.isalpha()]
    a, b = words[0], words[1]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    return vocab


def test_equal_tokenizers_match_and_others_are_named() -> None:
    same = _tokenizer(tiny_vocab())
    assert token_id_mismatch(same, _tokenizer(tiny_vocab())) is None
    assert "cls_token" in token_id_mismatch(same, _tokenizer(_shifted()))
    swapped = token_id_mismatch(same, _tokenizer(_swapped()))
    assert swapped is not None and "here and" in swapped
    assert "word pieces" in token_id_mismatch(same, _tokenizer(tiny_vocab()[:-1]))


@pytest.mark.parametrize("vocab", [_shifted, _swapped], ids=["shifted", "swapped"])
def test_validate_refuses_a_student_of_another_tokenizer_terms_over_its_ids(tmp_path: Path, vocab) -> None:
    """``attention_kl`` and the masked-LM terms compare distributions over one tokenizer's pieces: a
    student initialised from a checkpoint of another tokenizer may not use them; with prediction-level
    and the other layer-wise terms it may (distilled across tokenizers, on the aligned positions)."""
    teacher = make_tiny_model_dir(tmp_path / "teacher")
    other = _retokenized(tmp_path / "other", vocab())
    student = {"name": "s", "init_from": str(other), "objective": {"kd_weight": 1.0, "attention_kl": 1.0}}
    recipe = tiny_recipe(tmp_path, teacher, make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8),
                         students=[student])
    path = write_recipe(tmp_path / "r.yaml", recipe)
    result = cli(["validate", str(path)], cwd=tmp_path)
    assert result.returncode == 2
    line = result.stderr.strip()
    assert "\n" not in line and str(other) in line and str(teacher) in line
    assert "student s: init_from" in line and "tokenizes otherwise than the teacher" in line
    assert "stage 0's attention_kl needs the teacher's token ids" in line and "layer-wise terms but" in line
    for objective in ({"kd_weight": 1.0, "hard_weight": 0.5}, {"kd_weight": 1.0, "hidden": 1.0, "qkv_relation": 1.0}):
        student["objective"] = objective  # distilled across tokenizers
        assert cli(["validate", str(write_recipe(path, recipe))], cwd=tmp_path).returncode == 0
    recovery = {"kind": "prune_ffn", "keep": 0.5, "recover": {"objective": {"kd_weight": 1.0, "attention_kl": 1.0}}}
    recipe["students"].append({"name": "later", "init_from": "s", "stages": [], "compress": [recovery]})
    result = cli(["validate", str(write_recipe(path, recipe))], cwd=tmp_path)
    assert result.returncode == 2 and "student later: it starts from student s" in result.stderr
    assert "the recovery of compress step prune_ffn's attention_kl" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_init_from_takes_an_alias_and_checks_its_tokenizer(tmp_path: Path) -> None:
    """``init_from: minilm-l6`` names the packaged MiniLM as the CLI's --model does; its tokenizer
    is not the tiny teacher's, so ``attention_kl`` is refused naming the resolved dir, and
    prediction-level distillation across tokenizers validates."""
    from tinyplm.models import resolve_model_dir

    teacher = make_tiny_model_dir(tmp_path / "teacher")
    student = {"name": "s", "init_from": "minilm-l6", "objective": {"kd_weight": 1.0, "attention_kl": 1.0}}
    recipe = tiny_recipe(tmp_path, teacher, make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8),
                         students=[student])
    path = write_recipe(tmp_path / "r.yaml", recipe)
    result = cli(["validate", str(path)], cwd=tmp_path)
    assert result.returncode == 2
    assert f"init_from {resolve_model_dir('minilm-l6')} tokenizes otherwise than the teacher" in result.stderr
    student["objective"] = {"kd_weight": 1.0, "hard_weight": 0.5}
    assert cli(["validate", str(write_recipe(path, recipe))], cwd=tmp_path).returncode == 0
    student["init_from"] = "minilm-l7"
    result = cli(["validate", str(write_recipe(path, recipe))], cwd=tmp_path)
    assert result.returncode == 2 and "student s: init_from: " in result.stderr and "minilm-l6" in result.stderr


def test_a_stage_teacher_of_another_tokenizer_is_refused(tmp_path: Path) -> None:
    teacher = make_tiny_model_dir(tmp_path / "teacher")
    other = _retokenized(tmp_path / "other", _shifted())
    stage = {"teacher": str(other), "objective": {"kd_weight": 0.0, "hidden": 1.0}, "train": {"epochs": 1}}
    recipe = tiny_recipe(tmp_path, teacher, make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8),
                         students=[{"name": "s", "teacher_layers": [1], "stages": [stage]}])
    result = cli(["validate", str(write_recipe(tmp_path / "r.yaml", recipe))], cwd=tmp_path)
    assert result.returncode == 2
    assert "stage 0: teacher" in result.stderr and "a stage teacher must share the tokenizer" in result.stderr


def test_a_student_of_its_own_tokenizer_learns_from_the_teachers_predictions(tmp_path: Path) -> None:
    """Distillation across tokenizers: the student reads its own ids, the teacher its own, the
    teacher's logits on example i are the targets of the student's example i; the student is saved
    with its tokenizer, compressed and scored in its own ids."""
    from conftest import TINY_TRAIN
    from tinyplm import tasks
    from tinyplm.config import validate_recipe
    from tinyplm.evaluate.model_eval import encode_evals, evaluate_model
    from tinyplm.models import load_classifier
    from tinyplm.run import run_or_reuse

    teacher = make_tiny_model_dir(tmp_path / "teacher")
    other = _retokenized(tmp_path / "other", _shifted())
    glue = make_tiny_glue(tmp_path / "glue", n_train=256, n_dev=64)
    recover = {"objective": {"kd_weight": 1.0}, "train": {**TINY_TRAIN, "max_steps": 8}}
    student = {"name": "s", "init_from": str(other), "objective": {"kd_weight": 1.0},  # no gold labels
               "train": {**TINY_TRAIN, "epochs": 6},
               "compress": [{"kind": "prune_ffn", "keep": 0.5, "recover": recover}]}
    cfg = validate_recipe(tiny_recipe(tmp_path, teacher, glue, students=[student]), source="test")
    record = run_or_reuse(cfg)
    run = Path(cfg.output_dir)
    data = tasks.get("sst2", glue).load()
    teacher_tok = load_classifier(run / "teacher", data.labels, False)[1]
    assert record.stage("s").info.init.endswith("its own tokenizer")
    for stage in ("s", "s.prune_ffn"):
        model, tok = load_classifier(run / "students" / stage, data.labels, False)
        assert tok.get_vocab() == _tokenizer(_shifted()).get_vocab()  # saved with its own tokenizer
        assert token_id_mismatch(tok, teacher_tok) is not None
        assert record.stage(stage).metrics == evaluate_model(model, data, encode_evals(data, tok, 32))
    # learnt from the teacher's predictions alone, aligned example by example (a misaligned target
    # would leave it at chance on this balanced toy task)
    assert record.teacher.metrics["accuracy"] >= 0.9
    assert record.stage("s").metrics["accuracy"] >= 0.8


@pytest.mark.parametrize(("family", "student", "said"), [
    ("mpnet", {"teacher_layers": [0, 2], "compress": [{"kind": "prune_heads", "keep": 0.5}]},
     "student s: compress step prune_heads is not possible for a mpnet model: its relative-position bias"),
    ("mpnet", {"name": "later", "init_from": "s0", "stages": [], "compress": [{"kind": "prune_heads", "keep": 0.5}]},
     "student later: compress step prune_heads is not possible for a mpnet model"),
    ("modernbert", {"teacher_layers": [0, 2], "objective": {"kd_weight": 1.0, "attention_kl": 1.0}},
     "student s: distilling attention scores (attention_kl) is not possible for a modernbert model"),
    ("mpnet", {"teacher_layers": [0, 2], "shape": {"layers": 2, "hidden": 32, "heads": 4, "ffn": 37, "keep_heads": 2}},
     "student s: shape.keep_heads is not possible for a mpnet model"),
    # a shape the teacher's layers cannot give: refused by validate, not after the teacher's fine-tune
    ("electra", {"teacher_layers": [0, 2], "shape": {"layers": 2, "hidden": 32, "heads": 2, "ffn": 37}},
     "student s: teacher_layers init needs the teacher's head count (4)"),
    ("electra", {"teacher_layers": [0, 2], "shape": {"layers": 2, "hidden": 32, "heads": 4, "ffn": 64}},
     "widths no larger than the teacher's (hidden 32, ffn 37)"),
    ("electra", {"teacher_layers": [0, 5]}, "student s: teacher_layers [5] out of range"),
])
def test_a_step_the_students_family_cannot_take_is_refused_before_the_run(tmp_path: Path, family, student,
                                                                          said) -> None:
    """The role table's ``cannot`` is checked by validate for each student's family (the teacher's
    for teacher_layers, an earlier student's for init_from), not only when the step is reached."""
    from helpers_families import make_family_dir

    teacher = make_family_dir(tmp_path / "teacher", family)
    students = [{"name": "s", **student}] if "name" not in student else \
        [{"name": "s0", "teacher_layers": [0, 2]}, student]
    recipe = tiny_recipe(tmp_path, teacher, make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8), students=students)
    result = cli(["validate", str(write_recipe(tmp_path / "r.yaml", recipe))], cwd=tmp_path)
    assert result.returncode == 2 and said in result.stderr, result.stderr
    assert not (tmp_path / "runs").exists()


def test_a_student_of_its_own_tokenizer_learns_the_teachers_layers(tmp_path: Path) -> None:
    """Layer-wise distillation across tokenizers: a first stage of hidden states and attention
    scores (no logits), the teacher run on its own ids and compared on the positions both cut alike
    (here all: one vocabulary in other ids), then prediction-level KD; the alignment is logged."""
    import json

    from conftest import TINY_TRAIN
    from tinyplm.config import validate_recipe
    from tinyplm.run import run_or_reuse

    teacher = make_tiny_model_dir(tmp_path / "teacher")
    other = _retokenized(tmp_path / "other", _shifted())
    glue = make_tiny_glue(tmp_path / "glue", n_train=128, n_dev=32)
    stages = [{"name": "layers", "objective": {"kd_weight": 0.0, "hidden": 1.0, "attention_scores": 1.0},
               "train": {**TINY_TRAIN, "max_steps": 6}},
              {"name": "logits", "objective": {"kd_weight": 1.0}, "train": {**TINY_TRAIN, "epochs": 4}}]
    cfg = validate_recipe(tiny_recipe(tmp_path, teacher, glue, students=[
        {"name": "s", "init_from": str(other), "stages": stages}]), source="test")
    record = run_or_reuse(cfg)
    run = Path(cfg.output_dir)
    logged = [json.loads(line) for line in (run / "logs" / "train.jsonl").read_text().splitlines()]
    aligned = [r for r in logged if r.get("event") == "aligned_pieces"]
    assert [r["stage"] for r in aligned] == ["s/layers"]
    assert aligned[0]["share"] == 1.0 and aligned[0]["aligned"] == aligned[0]["positions"] > 128
    texts = [line.split("\t")[0] for line in (glue / "SST-2" / "train.tsv").read_text().splitlines()[1:33]]
    assert _hidden_loss(run / "teacher", run / "students" / "s.stage-0", texts) < _hidden_loss(run / "teacher", other,
                                                                                                  texts)
    assert record.stage("s").info.training[0].stage == "layers"


def _hidden_loss(teacher_dir: Path, student_dir: Path, texts: list[str]) -> float:
    """The hidden-state term of the student against the teacher, across their tokenizers, on ``texts``."""
    from tinyplm.config.schema import ObjectiveSpec
    from tinyplm.distill.aligned_pieces import TeacherPieces, align
    from tinyplm.distill.objective import build_objective
    from tinyplm.models import load_classifier
    from tinyplm.tasks.base import Example, Split
    from tinyplm.tasks.encoding import collate, encode_split
    from tinyplm.train.objective import supervised_batch

    split = Split("train", [Example(t, None, 0, i) for i, t in enumerate(texts)], None)
    (teacher, t_tok), (student, s_tok) = (load_classifier(d, ("negative", "positive"), False)
                                          for d in (teacher_dir, student_dir))
    t_enc, s_enc = encode_split(split, t_tok, 32), encode_split(split, s_tok, 32)
    objective = build_objective(ObjectiveSpec(kd_weight=0.0, hidden=1.0), student.config, teacher.config, False)
    objective.read_teacher_from(TeacherPieces(t_enc, align(t_enc, t_tok, s_enc, s_tok)))
    batch = supervised_batch(collate(s_enc, list(range(len(texts)))))
    with torch.no_grad():
        t = objective.teacher_outputs(teacher.eval(), batch)
        return objective.terms(objective._features(student.eval(), batch), t, batch.targets, None)[1]["hidden"]


def _without_segments(model: Path) -> Path:
    """The tiny BERT in ``model`` cut to one segment row (``type_vocab_size: 1``), as a checkpoint
    trained without segments is, its tokenizer still BERT's (segment id 1 for a pair's second text)."""
    import json

    import safetensors.torch as st_io

    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "type_vocab_size": 1}))
    weights = st_io.load_file(str(model / "model.safetensors"))
    key = next(k for k in weights if k.endswith("token_type_embeddings.weight"))
    st_io.save_file({**weights, key: weights[key][:1].contiguous()}, str(model / "model.safetensors"))
    return model


def test_a_pair_task_on_a_checkpoint_without_segment_rows_is_refused(tmp_path: Path) -> None:
    """BERT's tokenizer gives a pair's second text segment id 1; a checkpoint trained without
    segments (``type_vocab_size: 1``) has no row for it: validate refuses before the teacher's
    fine-tune would fail at its first batch; a single-sentence task on it validates."""
    from helpers_doc_world import write_tiny_data

    teacher = _without_segments(make_tiny_model_dir(tmp_path / "teacher"))
    write_tiny_data(tmp_path / "data")
    recipe = tiny_recipe(tmp_path, teacher, tmp_path / "data" / "glue")
    recipe["task"]["name"] = "mrpc"
    result = cli(["validate", str(write_recipe(tmp_path / "r.yaml", recipe))], cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert f"{teacher / 'config.json'}: type_vocab_size 1 has no row for segment id 1" in result.stderr
    assert "task 'mrpc' is a pair task" in result.stderr
    recipe["task"]["name"] = "sst2"
    assert cli(["validate", str(write_recipe(tmp_path / "r.yaml", recipe))], cwd=tmp_path).returncode == 0


def test_pairs_on_a_checkpoint_without_segment_rows_are_refused_by_evaluate_predict_and_serve(tmp_path: Path) -> None:
    """The same checkpoint outside a run: evaluate on a pair task and predict of a pairs file are
    refused with the reason (they crashed with an IndexError), serve answers a request with a
    text_pair 422 naming the field (it answered 500); single texts are predicted and served."""
    import time

    from fastapi.testclient import TestClient

    from helpers_doc_world import write_tiny_data
    from tinyplm.inference.predictor import Predictor
    from tinyplm.serve.app import ServeSettings, create_app

    model = _without_segments(make_tiny_model_dir(tmp_path / "model"))
    write_tiny_data(tmp_path / "data")
    reason = f"{model / 'config.json'}: type_vocab_size 1 has no row for segment id 1"
    result = cli(["evaluate", str(model), "--task", "mrpc", "--data-dir", str(tmp_path / "data")], cwd=tmp_path)
    assert result.returncode == 2 and reason in result.stderr and "Traceback" not in result.output, result.output
    (tmp_path / "pairs.jsonl").write_text('{"text": "a film", "pair": "the plot"}\n', encoding="utf-8")
    result = cli(["predict", str(model), "-i", "pairs.jsonl", "--text-column", "text", "--pair-column", "pair",
                  "-o", "out.jsonl"], cwd=tmp_path)
    assert result.returncode == 2 and reason in result.stderr and "Traceback" not in result.output, result.output
    assert not (tmp_path / "out.jsonl").exists()
    app, state = create_app(Predictor.load(model), ServeSettings())
    with TestClient(app) as client:
        for _ in range(500):
            if state.ready:
                break
            time.sleep(0.01)
        assert client.post("/predict", json={"text": "a film"}).status_code == 200
        answer = client.post("/predict", json={"inputs": [{"text": "a"}, {"text": "a film", "text_pair": "plot"}]})
        assert answer.status_code == 422, answer.text
        (problem,) = answer.json()["problems"]
        assert problem["field"] == "inputs[1].text_pair" and reason in problem["expected"]
    from tinyplm.config.schema import TaskSpec
    from tinyplm.errors import ModelError
    from tinyplm.run.measure import bench

    with pytest.raises(ModelError, match=reason):
        bench([model], TaskSpec(name="mrpc", data_dir=str(tmp_path / "data")), rounds=1)


def test_deberta_v3s_zero_segment_rows_read_no_segments_and_take_pairs() -> None:
    """DeBERTa-v3 configs say type_vocab_size 0: the model adds no segment embeddings at all, so the
    segment ids its tokenizer gives a pair's second text are never looked up."""
    from transformers import DebertaV2Config

    from tinyplm.models.token_ids import segment_problem

    class Pairs:
        def __call__(self, *texts, return_token_type_ids=True):
            return {"token_type_ids": [0, 0, 0, 1, 1]}

    assert DebertaV2Config().type_vocab_size == 0
    assert segment_problem(Path("d"), DebertaV2Config().to_dict(), Pairs()) is None
    refused = segment_problem(Path("b"), {"type_vocab_size": 1}, Pairs())
    assert refused is not None and "type_vocab_size 1 has no row for segment id 1" in refused


def test_the_cut_a_student_of_its_own_tokenizer_reads_is_counted_in_its_pieces(tmp_path: Path) -> None:
    """The run said how many texts task.max_length cut in the teacher's pieces only: a student whose
    tokenizer splits finer read most of its texts cut, unsaid."""
    import string
    from types import SimpleNamespace

    from tinyplm import tasks
    from tinyplm.config import TaskSpec
    from tinyplm.evaluate.model_eval import encode_evals
    from tinyplm.run.inputs import RunInputs
    from tinyplm.tasks.encoding import encode_split

    glue = make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8)
    data = tasks.get("sst2", glue).load()
    words = _tokenizer(tiny_vocab())
    letters = _tokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *string.ascii_lowercase,
                          *("##" + c for c in string.ascii_lowercase), *".,!?'-"])
    task = TaskSpec(name="sst2", data_dir=str(glue), max_length=12)
    inp = RunInputs(task, data, words, encode_split(data.train, words, 12), encode_evals(data, words, 12),
                    teachers=None, stage_data=SimpleNamespace(split=lambda kind: data.train), paths=None)
    assert inp.with_tokenizer(words).own.cut == ()  # the toy sentences fit in 12 of their word pieces
    cut = {c.split: c for c in inp.with_tokenizer(letters).own.cut}
    assert set(cut) == {"train", "dev"} and cut["train"].examples == len(data.train.examples)
    assert 0 < cut["train"].cut <= cut["train"].examples and cut["train"].width == 12
