"""Every family through every stage, over its config space (property-based).

For tiny configs drawn per family (``helpers_config_space``: attention variants, shared keys,
position buckets, embedding size against hidden, layer groups, local/global patterns, activations,
tied embeddings, vocabulary and tokenizer kind), the recipe shape a user runs goes through:
teacher -> a student of teacher layers -> prune heads -> prune FFN -> trim vocabulary -> an int8
runtime -> predict. Each stage is checked against what it claims:

- the student keeps every config field of the teacher's (present or absent), and a student of all
  the teacher's layers *is* the teacher (same logits), so no wiring was lost;
- pruning removes what its settings promise, counted off the modules, and the config's shape says it;
- every saved stage reloads with identical logits; trimming keeps the logits; the runtime agrees
  with its parent;
- ``tinyplm predict``'s Predictor on the final directory gives the labels the loaded model gives.

``make test`` runs a fixed number of draws per family with a fixed seed (``DRAWS``); set
``TINYPLM_CONFIG_DRAWS`` to draw more (e.g. 50) and explore with a random seed:
``TINYPLM_CONFIG_DRAWS=50 .venv/bin/python -m pytest tests/models/test_config_space.py --hypothesis-seed=random``.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, note, seed, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from conftest import make_tiny_glue, make_tiny_model_dir, tiny_recipe, tiny_sentiment_rows
from helpers_config_space import FAMILIES, REFUSED, Drawn, family_configs
from helpers_families import tiny_tokenizer
from tinyplm.compress import CompressContext, apply_step
from tinyplm.config import validate_recipe
from tinyplm.config.compress import CompressStep
from tinyplm.config.schema import StudentSpec
from tinyplm.errors import ModelError
from tinyplm.evaluate.size import count_params
from tinyplm.inference.predictor import Predictor
from tinyplm.inference.records import TextInput
from tinyplm.models import build_student, load_classifier, roles, save_model
from tinyplm.models.factorized import FactorizedEmbedding, LowRankLinear
from tinyplm.models.shape import layer_shape, params_from_config
from tinyplm.run.preflight import preflight
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import collate, encode_split, model_inputs

#: Draws per family: ``make test`` draws a few with a fixed seed; TINYPLM_CONFIG_DRAWS draws more,
#: seeded as hypothesis is told (``--hypothesis-seed``, random by default).
EXPLORE = "TINYPLM_CONFIG_DRAWS" in os.environ
DRAWS = int(os.environ.get("TINYPLM_CONFIG_DRAWS", "2"))
SEED = 20261128
LABELS = ("negative", "positive")
MAX_LENGTH = 12  # shorter than many of the texts: every stage sees truncated windows
#: The recipe's steps: prune heads, prune FFN, [one drawn from MIDDLE], trim, [a runtime from RUNTIMES].
PRUNE = [{"kind": "prune_heads", "keep": 0.5, "score_batches": 1},
         {"kind": "prune_ffn", "keep": 0.5, "score_batches": 1, "scope": "global"}]
MIDDLE = [None, {"kind": "drop_layers", "count": 1, "score_batches": 1}, {"kind": "svd", "ratio": 0.5},
          {"kind": "factorize_embeddings", "rank": 4}]  # share after pruning is refused by validation
RUNTIMES = [{"kind": "onnx_dynamic_int8"}, {"kind": "openvino", "precision": "f32"}]
EXPORTS = {"onnx_dynamic_int8", "openvino"}
#: Config keys a student sets itself (its sizes, groups, per-layer lists, labels) or that name
#: the checkpoint; every other key must be the teacher's.
OWN_KEYS = {"architectures", "_name_or_path", "transformers_version", "id2label", "label2id", "num_labels",
            "problem_type", "layer_types", "num_hidden_groups"}


@functools.cache
def _tokenizer_dir(kind: str, root: str) -> Path:
    path = Path(root) / f"tok-{kind}"
    tiny_tokenizer(kind).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tok_root(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("tokenizers"))


def _rows() -> list[Example]:
    texts = [t for t, _ in tiny_sentiment_rows(40, 3)]
    texts += [" ".join(texts[i:i + 4]) for i in range(0, 12, 4)]  # longer than MAX_LENGTH
    return [Example(t, None, i % 2, i) for i, t in enumerate(texts)]


def _teacher(drawn: Drawn, tmp: Path, tok_root: str):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(drawn.config)
    path = tmp / "teacher"
    model.save_pretrained(path)
    AutoTokenizer.from_pretrained(_tokenizer_dir(drawn.tokenizer_kind, tok_root)).save_pretrained(path)
    return load_classifier(path, LABELS, False)


def _logits(model, enc) -> torch.Tensor:
    with torch.no_grad():
        return model.eval()(**model_inputs(collate(enc, list(range(len(enc)))))).logits.float()


def _check_student(teacher, drawn: Drawn, enc) -> torch.nn.Module:
    """The student keeps the teacher's config; all layers copied give the teacher's logits."""
    layers = roles.config_shape(teacher.config).layers
    whole = build_student(StudentSpec(name="all", teacher_layers=list(range(layers))), teacher)
    torch.testing.assert_close(_logits(whole, enc), _logits(teacher, enc), atol=1e-5, rtol=0)
    student = build_student(StudentSpec(name="s", teacher_layers=[0, layers - 1]), teacher)
    mine, theirs = student.config.to_dict(), teacher.config.to_dict()
    sizes = roles.sizes_of(teacher.config)
    skip = OWN_KEYS | {sizes.layers}
    assert {k for k in theirs if k not in skip} <= set(mine), drawn
    assert {k: mine[k] for k in theirs if k not in skip} == {k: theirs[k] for k in theirs if k not in skip}
    assert roles.config_shape(student.config).layers == len(roles.layers(student)) == 2
    return student


def _check_attention_features(model, drawn: Drawn, enc) -> None:
    """Attention recomputed from the captured Q and K (with the family's position terms) is what
    the model itself softmaxes, on the rows of real query tokens."""
    from tinyplm.models.features import forward_features

    if roles.Stage.ATTENTION_FEATURES in roles.ROLES[drawn.family].cannot:
        return
    model = copy.deepcopy(model).eval()
    model.set_attn_implementation("eager")  # eager attention returns its probabilities
    batch = model_inputs(collate(enc, list(range(6))))
    feats = forward_features(model, batch, ["attn_probs"])
    with torch.no_grad():
        own = model(**batch, output_attentions=True).attentions
    real = batch["attention_mask"].bool()
    for mine, theirs in zip(feats.attn_probs, own, strict=True):
        for b in range(len(real)):
            n = int(real[b].sum())
            torch.testing.assert_close(mine[b, :, :n], theirs[b, :, :n], atol=1e-5, rtol=0)


def _context(tok, rows, tmp: Path) -> CompressContext:
    def encode(t, name="train"):
        return encode_split(Split(name, rows, tmp), t, MAX_LENGTH)

    return CompressContext(encode(tok), None, False, tmp / "work", tokenizer=tok, evals={"dev": encode(tok, "dev")},
                           texts=[(r.text, None) for r in rows], reencode=lambda t: (encode(t), {"dev": encode(t)}))


def _check_step(kind: str, before, after, before_logits, after_logits) -> None:
    """What the step promised, counted off the loaded model's modules."""
    shape_before, shape_after = layer_shape(before), layer_shape(after)
    if kind == "prune_heads":
        assert sum(shape_after["heads"]) == round(0.5 * sum(shape_before["heads"])) and min(shape_after["heads"]) >= 1
    elif kind == "prune_ffn":
        assert sum(shape_after["ffn"]) == round(0.5 * sum(shape_before["ffn"]))
    elif kind == "trim_vocab":  # the same pieces under new ids: the same outputs
        # (a tiny byte-level BPE may need every piece: its byte alphabet is most of it)
        assert after.config.vocab_size <= before.config.vocab_size
        torch.testing.assert_close(after_logits, before_logits, atol=1e-5, rtol=0)
    elif kind == "drop_layers":
        assert len(roles.layers(after)) == roles.config_shape(after.config).layers == len(roles.layers(before)) - 1
    elif kind == "svd":
        assert any(isinstance(m, LowRankLinear) for m in after.modules())
    elif kind == "share":
        assert len({roles.layer_linear(x, "ffn_out").weight.data_ptr() for x in roles.layers(after)}) == 1
    elif kind == "factorize_embeddings":
        assert isinstance(roles.word_embeddings(after), FactorizedEmbedding)
    assert count_params(after)[0] == params_from_config(after.config)  # the config says the size
    assert count_params(after)[0] < count_params(before)[0] or kind == "trim_vocab"


def _through_every_stage(drawn: Drawn, middle: dict | None, runtime: dict, tmp: Path, tok_root: str) -> None:
    teacher, tok = _teacher(drawn, tmp, tok_root)
    rows = _rows()
    ctx = _context(tok, rows, tmp)
    _check_attention_features(teacher, drawn, ctx.train)
    model = _check_student(teacher, drawn, ctx.train)
    steps = [*PRUNE, *([middle] if middle else []), {"kind": "trim_vocab"}, runtime]
    for i, raw in enumerate(steps):
        step = TypeAdapter(CompressStep).validate_python(raw)
        why = roles.ROLES[drawn.family].cannot.get(roles.Stage.PRUNE_HEADS) if raw["kind"] == "prune_heads" else None
        if why:  # a stage the family cannot take says why (validate refuses it before a run)
            with pytest.raises(ModelError, match="shared by every layer"):
                apply_step(model, step, ctx)
            continue
        before, before_logits = model, _logits(model, ctx.train)
        out, _ = apply_step(copy.deepcopy(model), step, ctx)  # a step changes its model in place
        out_logits = _logits(out, ctx.train)
        saved = save_model(out, ctx.tokenizer, tmp / f"stage{i}")
        model, _ = load_classifier(saved, LABELS, False)
        assert torch.equal(_logits(model, ctx.train), out_logits) or raw["kind"] in EXPORTS
        if raw["kind"] in EXPORTS:  # the runtime agrees with its PyTorch parent (int8: loosely)
            atol = 0.1 if "int8" in raw["kind"] else 1e-4
            torch.testing.assert_close(_logits(model, ctx.train), before_logits, atol=atol, rtol=0)
        else:
            _check_step(raw["kind"], before, model, before_logits, out_logits)
    predictor = Predictor.load(saved, max_length=MAX_LENGTH)
    got = [p.label for p in predictor.predict([TextInput(r.text) for r in rows])]
    expected = [LABELS[i] for i in _logits(model, ctx.train).argmax(-1).tolist()]
    assert got == expected


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_config_through_every_stage(family: str, tmp_path_factory, tok_root: str) -> None:
    @settings(max_examples=DRAWS, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(drawn=family_configs(family), middle=st.sampled_from(MIDDLE), runtime=st.sampled_from(RUNTIMES))
    def check(drawn: Drawn, middle: dict | None, runtime: dict) -> None:
        note(repr(drawn))
        _through_every_stage(drawn, middle, runtime, tmp_path_factory.mktemp(family.replace("-", "_")), tok_root)
        done.append(drawn.family)

    done: list[str] = []
    (check if EXPLORE else seed(SEED)(check))()
    assert done and set(done) == {family}  # every draw went through every stage


def _saved_teacher(family: str, tmp: Path, **fields) -> Path:
    """A tiny random sequence classifier of ``family`` saved in HF format (``fields`` on its config)."""
    from transformers import DebertaV2Config

    from helpers_families import make_family_dir

    if family != "deberta-v2":
        return make_family_dir(tmp / family, family)
    config = DebertaV2Config(vocab_size=400, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=20, max_position_embeddings=66, pad_token_id=1, **fields)
    _teacher(Drawn(family, config, "unigram", fields), tmp, str(tmp))
    return tmp / "teacher"


@pytest.mark.parametrize(("family", "fields", "per_layer", "message"), REFUSED, ids=[r[0] for r in REFUSED])
def test_a_config_value_no_stage_can_run_is_refused_before_work(tmp_path: Path, family: str, fields: dict,
                                                                   per_layer: bool, message: str) -> None:
    teacher = _saved_teacher(family, tmp_path)
    config = json.loads((teacher / "config.json").read_text())
    (teacher / "config.json").write_text(json.dumps({**config, **fields}))
    glue = make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8)
    student = {"name": "s", "teacher_layers": [0], "compress": [{"kind": "prune_ffn", "keep": 0.5}]}
    raw = tiny_recipe(tmp_path, teacher, glue, teacher={"model": str(teacher)}, students=[student])
    with pytest.raises(ModelError, match=re.escape(message)) as refused:
        preflight(validate_recipe(raw, source="test"))
    assert str(teacher / "config.json") in str(refused.value)
    assert not (tmp_path / "runs").exists()  # nothing written
    plain = tiny_recipe(tmp_path, teacher, glue, teacher={"model": str(teacher)}, students=[])
    if per_layer:  # the model itself runs: a recipe without per-layer stages is not refused
        preflight(validate_recipe(plain, source="test"))
    else:
        with pytest.raises(ModelError, match=re.escape(message)):
            preflight(validate_recipe(plain, source="test"))


RUN_DRAWS = int(os.environ.get("TINYPLM_CONFIG_RUN_DRAWS", "0"))


@pytest.mark.skipif(not RUN_DRAWS, reason="whole runs over the config space take ~15 s a draw: set "
                                          "TINYPLM_CONFIG_RUN_DRAWS=N to draw N per family")
@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_config_through_a_whole_run(family: str, tmp_path_factory, tok_root: str) -> None:
    """``tinyplm run`` of the user's recipe shape (fine-tune, a student of teacher layers with
    hidden-state and attention KD, prune, trim at a window shorter than the texts, the fastest
    runtime) on drawn configs: each run finishes, or preflight refuses it before writing anything."""
    from tinyplm.errors import TinyplmError
    from tinyplm.run import run_or_reuse

    @settings(max_examples=RUN_DRAWS, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(drawn=family_configs(family), max_length=st.sampled_from([8, 12, 32]),
           attention=st.booleans())
    def check(drawn: Drawn, max_length: int, attention: bool) -> None:
        note(repr(drawn))
        tmp = tmp_path_factory.mktemp(family.replace("-", "_"))
        teacher, _ = _teacher(drawn, tmp, tok_root)
        objective = {"kd_weight": 1.0, "hidden": 1.0, **({"attention_kl": 1.0} if attention else {})}
        student = {"name": "s", "teacher_layers": [0, roles.config_shape(teacher.config).layers - 1],
                   "objective": objective, "train": {"batch_size": 8, "max_steps": 2, "precision": "fp32",
                                                     "eval_every": 0, "checkpoint_every": 0},
                   "compress": [{"kind": "prune_heads", "keep": 0.5}, {"kind": "prune_ffn", "keep": 0.5},
                                {"kind": "trim_vocab"},
                                {"kind": "runtime", "runtime": "fastest", "control_examples": 16,
                                 "candidates": ["onnx_dynamic_int8", "openvino_int8"], "calibration_examples": 8}]}
        raw = tiny_recipe(tmp, tmp / "teacher", make_tiny_glue(tmp / "glue", n_train=32, n_dev=8),
                          teacher={"model": str(tmp / "teacher"), "finetune": {"batch_size": 8, "max_steps": 2,
                                                                               "precision": "fp32"}},
                          students=[student])
        raw["task"]["max_length"] = max_length
        cfg = validate_recipe(raw, source="test")
        try:
            preflight(cfg)
        except TinyplmError:
            assert not Path(cfg.output_dir).exists()  # refused before any work
            return
        record = run_or_reuse(cfg)
        assert record.stages[-1].name == "s.runtime"

    check()


@pytest.mark.parametrize(("family", "fields", "usable"), [
    ("xlm-roberta", {}, 64),  # 66 rows, positions counted from padding id 1 + 1
    ("electra", {}, 66),
    ("deberta-v2", {"position_biased_input": False, "relative_attention": True}, None),  # relative only
    ("modernbert", {}, None),  # rotary
])
def test_a_window_longer_than_the_teachers_positions_is_refused(tmp_path: Path, family: str, fields: dict,
                                                                  usable: int | None) -> None:
    from tinyplm.errors import RecipeError

    teacher = _saved_teacher(family, tmp_path, **fields)
    assert roles.usable_positions(json.loads((teacher / "config.json").read_text())) == usable
    glue = make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8)
    for length in ([usable, usable + 1] if usable else [128]):
        raw = tiny_recipe(tmp_path, teacher, glue, teacher={"model": str(teacher)}, students=[])
        raw["task"]["max_length"] = length
        cfg = validate_recipe(raw, source="test")
        if usable and length > usable:
            with pytest.raises(RecipeError, match=f"task.max_length {length} is longer than the {usable} positions"):
                preflight(cfg)
        else:
            assert preflight(cfg).teacher_dir == teacher


def test_a_window_longer_than_a_students_own_start_can_read_is_refused(tmp_path: Path) -> None:
    """A student that starts from another model (``init_from``) reads the texts in its own positions:
    a window its table cannot hold is refused before any work, naming that model, not the teacher."""
    from tinyplm.errors import RecipeError

    teacher = _saved_teacher("electra", tmp_path)  # 66 positions
    start = make_tiny_model_dir(tmp_path / "start")  # 64
    glue = make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8)
    for length, refused in ((64, False), (65, True)):
        raw = tiny_recipe(tmp_path, teacher, glue, teacher={"model": str(teacher)},
                          students=[{"name": "own", "init_from": str(start)}])
        raw["task"]["max_length"] = length
        cfg = validate_recipe(raw, source="test")
        if refused:
            with pytest.raises(RecipeError, match=r"task.max_length 65 is longer than the 64 positions the student "
                                                  rf"own's init_from {start / 'config.json'}"):
                preflight(cfg)
            assert not Path(cfg.output_dir).exists()
        else:
            try:
                preflight(cfg)
            except RecipeError as exc:  # another check may refuse this pairing, but never for its window
                assert "positions" not in str(exc), exc
