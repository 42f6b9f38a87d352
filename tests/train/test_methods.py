"""Fine-tuning methods on a tiny random BERT: which parameters train and which stay frozen, ULMFiT's
unfreezing and learning rates step by step, LoRA/IA3 merged into a plain checkpoint with the same
logits, and prompt/prefix tuning's saved adapter reloading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import BertForSequenceClassification

from conftest import TINY_TRAIN, make_tiny_model_dir, tiny_sentiment_rows
from tinyplm.config import TrainSpec
from tinyplm.models import load_classifier, save_model
from tinyplm.models.infer import predict_logits
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import encode_split
from tinyplm.train import PredictionObjective, StageIO, train
from tinyplm.train.methods import adapt, finish, load_adapter, param_counts, save_adapter
from tinyplm.train.ulmfit import Unfreezer, discriminative_groups, layer_groups, stlr_factor


def _data(tok, n: int = 64, seed: int = 0):
    examples = [Example(t, None, y, i) for i, (t, y) in enumerate(tiny_sentiment_rows(n, seed))]
    return encode_split(Split("train", examples, Path("x")), tok, 32)


def _spec(method: str = "full", steps: int = 3, **options) -> TrainSpec:
    return TrainSpec(**{**TINY_TRAIN, "max_steps": steps, "keep_best": False, "log_every": 1, "method": method,
                        "method_options": options})


def _fit(tiny_model_dir: Path, tmp_path: Path, spec: TrainSpec, step_hook=None):
    model, tok = load_classifier(tiny_model_dir, ("0", "1"), False)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    io = StageIO("t", tmp_path / "ckpt", tmp_path / "log.jsonl")
    result = train(model, _data(tok), PredictionObjective(), spec=spec, io=io, step_hook=step_hook)
    return before, result, tok


def _changed(before: dict, after: dict) -> set[str]:
    return {k for k in before if not torch.equal(before[k], after[k])}


def test_full_is_the_default_and_leaves_recipes_unchanged(tiny_model_dir: Path) -> None:
    model, _ = load_classifier(tiny_model_dir, ("0", "1"), False)
    assert adapt(model, TrainSpec()) is model
    assert "method" not in TrainSpec().model_dump() and "method_options" not in TrainSpec().model_dump()
    lora = TrainSpec(method="lora", method_options={"r": 4})
    dumped = lora.model_dump(mode="json")
    assert dumped["method_options"] == {"r": 4, "alpha": 16.0, "dropout": 0.1, "targets": None}
    assert TrainSpec(**dumped) == lora


def test_an_option_of_another_method_is_an_error() -> None:
    with pytest.raises(ValueError, match="method_options.r is read by lora, not by method bitfit"):
        TrainSpec(method="bitfit", method_options={"r": 4})
    with pytest.raises(ValueError, match="unknown role"):
        TrainSpec(method="lora", method_options={"targets": ["qury"]})


def test_frozen_trains_only_the_head(tiny_model_dir: Path, tmp_path: Path) -> None:
    before, result, _ = _fit(tiny_model_dir, tmp_path, _spec("frozen"))
    assert _changed(before, result.model.state_dict()) == {"classifier.weight", "classifier.bias"}
    assert result.trainable_params == 32 * 2 + 2
    assert all(p.requires_grad for p in result.model.parameters())  # later stages train it all again


def test_frozen_last4_trains_a_head_on_four_layers(tmp_path: Path) -> None:
    d = make_tiny_model_dir(tmp_path / "m")
    cfg = BertForSequenceClassification.from_pretrained(d).config
    cfg.num_hidden_layers = 4
    BertForSequenceClassification(cfg).save_pretrained(d)
    before, result, tok = _fit(d, tmp_path, _spec("frozen", features="last4"))
    assert result.trainable_params == 4 * 32 * 2 + 2
    after = {k.removeprefix("encoder."): v for k, v in result.model.state_dict().items()}
    assert all(torch.equal(before[k], after[k.removeprefix("bert.")]) for k in before if k.startswith("bert."))
    assert predict_logits(result.model, _data(tok, 8)).shape == (8, 2)


def test_bitfit_trains_biases_and_the_head(tiny_model_dir: Path, tmp_path: Path) -> None:
    before, result, _ = _fit(tiny_model_dir, tmp_path, _spec("bitfit"))
    changed = _changed(before, result.model.state_dict())
    assert "classifier.weight" in changed and "bert.encoder.layer.0.attention.self.query.bias" in changed
    assert all(k.endswith(".bias") or k.startswith("classifier.") for k in changed)
    assert not any(k.endswith("query.weight") or "word_embeddings" in k for k in changed)


@pytest.mark.parametrize(("method", "options", "changed_roles", "kept_roles"),
                         [("lora", {}, ("query", "key", "value"), ()),  # default: every encoder Linear
                          ("lora", {"targets": ("query", "value")}, ("query", "value"), ("key",)),
                          ("ia3", {}, ("key", "value"), ("query",))])
def test_adapters_train_their_targets_and_merge_into_a_plain_model(tiny_model_dir: Path, tmp_path: Path, method,
                                                                   options, changed_roles, kept_roles) -> None:
    before, result, _ = _fit(tiny_model_dir, tmp_path, _spec(method, steps=4, **options))
    after = result.model.state_dict()
    assert set(after) == set(before)  # merged: no adapter weights left, the same plain checkpoint keys
    changed = _changed(before, after)
    for role in changed_roles:
        assert f"bert.encoder.layer.1.attention.self.{role}.weight" in changed
    for role in kept_roles:
        assert f"bert.encoder.layer.1.attention.self.{role}.weight" not in changed
    assert "bert.embeddings.word_embeddings.weight" not in changed and "classifier.weight" in changed
    assert 0 < result.trainable_params < 0.5 * result.total_params  # tiny: the head and adapters weigh a lot
    if method == "lora" and not options:
        assert {"bert.encoder.layer.1.attention.output.dense.weight", "bert.encoder.layer.1.intermediate.dense.weight",
                "bert.encoder.layer.1.output.dense.weight"} <= changed


@pytest.mark.parametrize("method", ["lora", "prompt_tuning"])
def test_new_parameters_start_from_the_seed(tiny_model_dir: Path, method: str) -> None:
    def new_params(seed: int) -> dict:
        torch.manual_seed(1000 + seed)  # whatever the global RNG holds before
        wrapped = adapt(load_classifier(tiny_model_dir, ("0", "1"), False)[0], _spec(method).model_copy(
            update={"seed": 7}))
        return {n: p.detach().clone() for n, p in wrapped.named_parameters() if "lora_A" in n or "prompt" in n}

    a, b = new_params(0), new_params(1)
    assert a and all(torch.equal(a[n], b[n]) for n in a)


@pytest.mark.parametrize("method", ["lora", "ia3"])
def test_merge_and_save_gives_identical_logits(tiny_model_dir: Path, tmp_path: Path, method: str) -> None:
    model, tok = load_classifier(tiny_model_dir, ("0", "1"), False)
    enc = _data(tok, 16)
    wrapped = adapt(model, _spec(method))
    torch.manual_seed(1)
    with torch.no_grad():  # a trained adapter: non-zero update (LoRA's B starts at 0, IA3's scales at 1)
        for name, p in wrapped.named_parameters():
            if "lora_B" in name or "ia3_l" in name:
                p.add_(torch.randn_like(p) * 0.5)
    wrapped.eval()
    adapted = predict_logits(wrapped, enc)
    merged = finish(wrapped, _spec(method))
    assert type(merged).__name__ == "BertForSequenceClassification"
    torch.testing.assert_close(predict_logits(merged, enc), adapted, rtol=0, atol=1e-5)
    assert not torch.allclose(predict_logits(load_classifier(tiny_model_dir, ("0", "1"), False)[0], enc), adapted)
    save_model(merged, tok, tmp_path / "saved")
    reloaded, _ = load_classifier(tmp_path / "saved", ("0", "1"), False)
    torch.testing.assert_close(predict_logits(reloaded, enc), adapted, rtol=0, atol=1e-5)


@pytest.mark.parametrize("method", ["prompt_tuning", "prefix_tuning"])
def test_prompt_and_prefix_tuning_train_tokens_and_their_adapter_reloads(tiny_model_dir: Path, tmp_path: Path,
                                                                        method: str) -> None:
    _, result, tok = _fit(tiny_model_dir, tmp_path, _spec(method, virtual_tokens=5))
    model = result.model.eval()
    assert type(model).__name__.startswith("PeftModel")
    assert result.trainable_params == param_counts(model).trainable < 0.2 * result.total_params
    enc = _data(tok, 16)
    logits = predict_logits(model, enc)
    folder = save_adapter(model, tmp_path / "adapter")
    assert {"adapter_config.json", "adapter_model.safetensors"} <= {p.name for p in folder.iterdir()}
    base, _ = load_classifier(tiny_model_dir, ("0", "1"), False)
    torch.testing.assert_close(predict_logits(load_adapter(base, folder), enc), logits, rtol=0, atol=1e-6)


def test_ulmfit_groups_and_learning_rates(tiny_model_dir: Path) -> None:
    model, _ = load_classifier(tiny_model_dir, ("0", "1"), False)
    groups = layer_groups(model)
    names = {id(p): n for n, p in model.named_parameters()}
    assert len(groups) == 4  # head + pooler, layer 2, layer 1, embeddings
    assert {names[id(p)] for p in groups[0]} == {"bert.pooler.dense.weight", "bert.pooler.dense.bias",
                                                  "classifier.weight", "classifier.bias"}
    assert all(names[id(p)].startswith("bert.encoder.layer.1.") for p in groups[1])
    assert all(names[id(p)].startswith("bert.encoder.layer.0.") for p in groups[2])
    assert all(names[id(p)].startswith("bert.embeddings.") for p in groups[3])
    scales = {g["layer_group"]: g["lr_scale"] for g in discriminative_groups(model, model, 0.01, 2.0)}
    assert scales == {0: 1.0, 1: 0.5, 2: 0.25, 3: 0.125}
    assert [Unfreezer(groups, 2).trainable_groups(s) for s in range(9)] == [1, 1, 2, 2, 3, 3, 4, 4, 4]


def test_slanted_triangular_schedule() -> None:
    options = TrainSpec(method="ulmfit", method_options={"stlr_cut": 0.25, "stlr_ratio": 5}).method_options
    assert [stlr_factor(p, options) for p in (0.0, 0.125, 0.25, 0.625, 1.0)] == pytest.approx([0.2, 0.6, 1.0, 0.6, 0.2])


def test_ulmfit_unfreezes_one_group_down_every_n_steps(tiny_model_dir: Path, tmp_path: Path) -> None:
    seen: list[list[bool]] = []
    holder: dict = {}

    def hook(_progress: float) -> None:  # after each optimiser step: which groups trained in it
        seen.append([all(p.requires_grad for p in g) for g in holder["groups"]])

    spec = _spec("ulmfit", steps=5, unfreeze_every=2, lr_decay=2.0)
    model, tok = load_classifier(tiny_model_dir, ("0", "1"), False)
    holder["groups"] = layer_groups(model)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    io = StageIO("u", tmp_path / "c", tmp_path / "log.jsonl")
    result = train(model, _data(tok), PredictionObjective(), spec=spec, io=io, step_hook=hook)
    assert seen == [[True, False, False, False]] * 2 + [[True, True, False, False]] * 2 + [[True, True, True, False]]
    changed = _changed(before, result.model.state_dict())
    assert any(k.startswith("bert.encoder.layer.0.") for k in changed)
    assert not any(k.startswith("bert.embeddings.") for k in changed)
    lrs = [e["lr"] for e in map(json.loads, (tmp_path / "log.jsonl").read_text().splitlines()) if e["event"] == "train"]
    expected = [spec.lr * stlr_factor(s / 5, spec.method_options) for s in range(5)]
    assert lrs == pytest.approx(expected)  # group 0 (the head) at the full rate, on the slanted triangle


def test_every_trained_stage_records_its_cost(tiny_model_dir: Path, tmp_path: Path) -> None:
    _, result, _ = _fit(tiny_model_dir, tmp_path, _spec("full", steps=2))
    info = result.resources()
    assert info["trainable_params"] == info["total_params"] == sum(p.numel() for p in result.model.parameters())
    assert info["trainable_share"] == 1.0 and info["peak_rss_mib"] > 10 and info["rss_scope"] in ("stage", "process")


@pytest.mark.parametrize("method", ["lora", "ia3", "ulmfit"])
def test_an_albert_keeps_its_shared_layer_through_adapters_and_unfreezing(tmp_path: Path, method: str) -> None:
    """A tiny ALBERT (3 layer steps sharing one group) fine-tuned by LoRA, IA3 or ULMFiT is still
    one shared group of the same size: the methods adapt and unfreeze the group the steps share
    instead of giving each step a copy first (which tripled the encoder and saved it so)."""
    from helpers_families import make_family_dir

    model, tok = load_classifier(make_family_dir(tmp_path / "albert", "albert"), ("0", "1"), False)
    size = sum(p.numel() for p in model.parameters())
    before = {k: v.clone() for k, v in model.state_dict().items()}
    if method == "ulmfit":  # head and E -> H projection, the shared group, the embeddings
        assert [len(g) > 0 for g in layer_groups(model)] == [True] * 3
    spec = _spec(method, steps=4, **({"unfreeze_every": 1} if method == "ulmfit" else {}))
    io = StageIO("a", tmp_path / "c", tmp_path / "log.jsonl")
    result = train(model, _data(tok), PredictionObjective(), spec=spec, io=io)
    assert result.model.config.num_hidden_groups == 1
    assert sum(p.numel() for p in result.model.parameters()) == size
    changed = _changed(before, result.model.state_dict())
    assert any(".albert_layer_groups.0." in k for k in changed)  # the shared group trained
    assert 0 < result.trainable_params <= size


def test_targets_naming_part_of_a_fused_linear_are_refused(tmp_path: Path) -> None:
    """ModernBERT's query, key and value are one Linear (Wqkv): LoRA on 'query' alone would adapt
    all three without saying so. Naming all three, or the defaults, adapt it once."""
    from helpers_families import make_family_dir
    from tinyplm.errors import RecipeError

    folder = make_family_dir(tmp_path / "modernbert", "modernbert")
    model, _ = load_classifier(folder, ("0", "1"), False)
    with pytest.raises(RecipeError, match=r"targets: query is one Linear \(attn\.Wqkv\) with key, value in modernbert"):
        adapt(model, _spec("lora", targets=("query",)))
    wrapped = adapt(model, _spec("lora", targets=("query", "key", "value")))
    adapted = {n.split(".lora_A")[0] for n, _ in wrapped.named_parameters() if "lora_A" in n}
    assert len(adapted) == 3 and all(n.endswith("attn.Wqkv") for n in adapted)  # once in each of 3 layers


def test_a_lora_rank_not_below_the_layers_width_is_refused(tiny_model_dir: Path) -> None:
    """Rank 32 on layers 32 wide is a full-rank update with more parameters than each layer: not
    what LoRA is for, and the run would report more parameters trained than the model has."""
    from tinyplm.errors import RecipeError

    model, _ = load_classifier(tiny_model_dir, ("0", "1"), False)
    with pytest.raises(RecipeError, match=r"method_options.r = 32 is not below 32, the hidden size"):
        adapt(model, _spec("lora", r=32))
    assert param_counts(adapt(model, _spec("lora", r=31))).share < 1


@pytest.mark.parametrize(("every", "said"), [(None, True), (1, False)])
def test_ulmfit_says_when_a_stage_ends_with_layers_never_unfrozen(tiny_model_dir: Path, tmp_path: Path, caplog,
                                                                  every: int | None, said: bool) -> None:
    """Four steps of an epoch of four batches unfreeze only the head by default (one group per epoch): a
    time budget ends such a stage as silently, and the model looks fine-tuned. The stage says so, in
    its log and as a warning; one group a step reaches the embeddings and says nothing."""
    spec = _spec("ulmfit", steps=4, **({"unfreeze_every": every} if every else {}))
    with caplog.at_level("WARNING"):
        _fit(tiny_model_dir, tmp_path, spec)
    events = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    notes = [e["note"] for e in events if e["event"] == "ulmfit_frozen"]
    assert bool(notes) is said and ("ulmfit trained 1 of its 4 layer groups" in caplog.text) is said
    if said:
        assert "lower unfreeze_every or train longer" in notes[0]
