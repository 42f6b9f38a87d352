"""`tinyplm pretrain` end to end on a tiny model and corpus: every objective trains, evaluates,
saves, resumes, and its model plugs into the core's fine-tuning."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from tests.conftest import FILLER, make_tiny_glue, make_tiny_mlm_dir, tiny_recipe

from tinyplm.config.pretrain import PretrainRecipe
from tinyplm.errors import TinyplmError
from tinyplm.pretrain.run import pretrain

TRAIN = {"batch_size": 16, "lr": 3.0e-3, "precision": "fp32", "eval_every": 0, "checkpoint_every": 0,
         "keep_best": False, "max_steps": 120, "epochs": 50}
SHAPE = {"layers": 2, "hidden": 32, "heads": 4, "ffn": 37}


def _corpus(folder: Path, docs: int = 4, paragraphs: int = 30, seed: int = 0) -> Path:
    """Documents of short sentences over the tiny vocabulary, with a learnable pattern (a word
    is often followed by the same word)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for d in range(docs):
        paras = []
        for _ in range(paragraphs):
            sents = []
            for _ in range(rng.randint(2, 4)):
                words = []
                for _ in range(rng.randint(3, 7)):
                    w = rng.choice(FILLER)
                    words += [w, w]
                sents.append(" ".join(words).capitalize() + ".")
            paras.append(" ".join(sents))
        (folder / f"doc{d}.txt").write_text("\n\n".join(paras), encoding="utf-8")
    return folder


def _recipe(tmp: Path, **objective) -> PretrainRecipe:
    tok = make_tiny_mlm_dir(tmp / "tok")
    return PretrainRecipe.model_validate({
        "name": "p", "output_dir": str(tmp / "run"), "shape": SHAPE, "tokenizer": str(tok),
        "corpus": {"paths": [str(_corpus(tmp / "corpus"))], "max_length": 48, "holdout": 0.1},
        "objective": objective, "train": TRAIN, "eval": {"pppl_texts": 5},
    })


@pytest.mark.parametrize("objective", [
    {"kind": "mlm"},
    {"kind": "mlm", "masking": {"strategy": "whole_word", "static_copies": 3}},
    {"kind": "mlm", "pairs": "sop", "masking": {"strategy": "span"}},
    {"kind": "mlm", "pairs": "nsp", "masking": {"strategy": "ngram"}},
], ids=["dynamic", "wwm-static", "span-sop", "ngram-nsp"])
def test_mlm_objectives_learn_and_save(tmp_path: Path, objective: dict) -> None:
    recipe = _recipe(tmp_path, **objective)
    record = pretrain(recipe)
    before, after = record.before, record.after
    assert after["mlm_loss"] < before["mlm_loss"] - 0.5
    assert after["mlm_loss"] < after["unigram_loss"]  # the doubled words are learnable from context
    assert after["pseudo_perplexity"] > 1.0
    if objective.get("pairs"):
        assert 0.0 <= after[f"{objective['pairs']}_accuracy"] <= 1.0
    saved = json.loads((tmp_path / "run" / "pretrain.json").read_text())
    assert saved["steps"] == 120
    from transformers import AutoConfig

    arch = AutoConfig.from_pretrained(tmp_path / "run" / "model").architectures[0]
    assert arch == ("BertForPreTraining" if objective.get("pairs") else "BertForMaskedLM")


def test_electra_trains_the_discriminator(tmp_path: Path) -> None:
    recipe = _recipe(tmp_path, kind="electra", masking={"split": [1.0, 0.0, 0.0]},
                     electra={"generator_fraction": 0.5, "disc_weight": 50.0})
    record = pretrain(recipe)
    before, after = record.before, record.after
    assert after["generator_mlm_loss"] < before["generator_mlm_loss"]
    assert after["rtd_loss"] < before["rtd_loss"]
    assert 0.0 < after["replaced_share"] < 0.15  # only masked positions can be replaced
    from transformers import AutoConfig, BertModel

    assert AutoConfig.from_pretrained(tmp_path / "run" / "model").architectures == ["BertModel"]
    disc = BertModel.from_pretrained(tmp_path / "run" / "model")
    assert disc.config.hidden_size == 32


def test_generator_shares_the_embeddings(tmp_path: Path) -> None:
    from transformers import BertConfig, BertModel

    from tinyplm.config.pretrain import ElectraSpec
    from tinyplm.pretrain.electra import ElectraGenerator

    disc = BertModel(BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=37))
    gen = ElectraGenerator(disc.config, ElectraSpec(generator_fraction=0.25))
    assert gen.config.hidden_size == 8 and gen.config.num_attention_heads == 1
    assert not any(p.shape[0] == 99 and p.ndim == 2 for p in gen.parameters())  # no vocabulary matrix of its own
    inputs = {"input_ids": torch.randint(5, 99, (2, 6)), "attention_mask": torch.ones(2, 6, dtype=torch.long),
              "token_type_ids": torch.zeros(2, 6, dtype=torch.long)}
    selected = torch.zeros(2, 6, dtype=torch.bool)
    selected[0, 2] = selected[1, 4] = True
    logits = gen(disc.embeddings.word_embeddings, inputs, selected)
    assert logits.shape == (2, 99)
    logits.sum().backward()
    assert disc.embeddings.word_embeddings.weight.grad is not None  # the tie carries gradients back


def test_resume_continues_and_refuses_to_overwrite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyplm.pretrain.objective import PretrainObjective

    recipe = _recipe(tmp_path)
    recipe = recipe.model_copy(update={"train": recipe.train.model_copy(update={"checkpoint_every": 30})})
    original, calls = PretrainObjective.prepare, {"n": 0}

    def killed_after_70(self, batch):  # the process dies during step 71 (last checkpoint: step 60)
        calls["n"] += 1
        if calls["n"] > 70:
            raise KeyboardInterrupt
        return original(self, batch)

    monkeypatch.setattr(PretrainObjective, "prepare", killed_after_70)
    with pytest.raises(KeyboardInterrupt):
        pretrain(recipe)
    monkeypatch.setattr(PretrainObjective, "prepare", original)
    with pytest.raises(TinyplmError, match="--resume"):
        pretrain(recipe)
    changed = recipe.model_copy(update={"train": recipe.train.model_copy(update={"lr": 1e-3})})
    with pytest.raises(TinyplmError, match="recipe changed"):
        pretrain(changed, resume=True)
    record = pretrain(recipe, resume=True)
    assert record.steps == 120
    log = [json.loads(x) for x in (tmp_path / "run" / "logs" / "train.jsonl").read_text().splitlines()]
    assert any(e["event"] == "resume" and e["step"] == 60 for e in log)
    with pytest.raises(TinyplmError, match="finished"):
        pretrain(recipe)


def test_continued_pretraining_fits_a_head_first(tmp_path: Path, tiny_model_dir: Path) -> None:
    """A bare classifier checkpoint (no MLM head) gets one fitted, then all of it trains."""
    recipe = PretrainRecipe.model_validate({
        "name": "c", "output_dir": str(tmp_path / "run"), "init": str(tiny_model_dir),
        "corpus": {"paths": [str(_corpus(tmp_path / "corpus"))], "max_length": 48, "holdout": 0.1},
        "train": TRAIN, "eval": {"pppl_texts": 5}, "fit_head_steps": 5,
    })
    record = pretrain(recipe)
    assert (tmp_path / "run" / "mlm_head" / "model.safetensors").is_file()
    assert record.after["pseudo_perplexity"] < record.before["pseudo_perplexity"]


@pytest.mark.parametrize("objective", [{"kind": "mlm", "pairs": "sop"}, {"kind": "electra"}], ids=["sop", "electra"])
def test_pretrained_encoder_plugs_into_finetuning(tmp_path: Path, objective: dict) -> None:
    from tinyplm.config import validate_recipe
    from tinyplm.run import run

    pretrain(_recipe(tmp_path, **objective))
    glue = make_tiny_glue(tmp_path / "glue")
    raw = tiny_recipe(tmp_path, tmp_path / "run" / "model", glue,
                      students=[{"name": "s", "shape": {"layers": 1, "hidden": 32, "heads": 4, "ffn": 37},
                                 "train": {"batch_size": 16, "lr": 3e-3, "precision": "fp32", "epochs": 2,
                                           "eval_every": 0, "checkpoint_every": 0}}])
    record = run(validate_recipe(raw))
    assert record.teacher.metrics["accuracy"] > 0.6  # the toy task is learnable from the pre-trained encoder
    assert record.stage("s").params > 0


def test_recipe_needs_init_or_shape(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="exactly one of init"):
        PretrainRecipe.model_validate({"corpus": {"paths": ["x"]}})


def test_cli_pretrain_prints_the_table_and_writes_the_run(tmp_path: Path) -> None:
    import yaml
    from typer.testing import CliRunner

    from tinyplm.cli import app

    recipe = _recipe(tmp_path).model_dump(mode="json")
    recipe["train"]["max_steps"] = 10
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    result = CliRunner().invoke(app, ["pretrain", str(path), "eval.pppl_texts=2"])
    assert result.exit_code == 0, result.output
    assert "mlm_loss" in result.output and "unigram_loss" in result.output
    for name in ("config.resolved.yaml", "pretrain.json", "logs/train.jsonl", "model/config.json"):
        assert (tmp_path / "run" / name).is_file(), name
    again = CliRunner().invoke(app, ["pretrain", str(path)])
    assert again.exit_code != 0 and "finished" in str(again.exception)
    path.write_text(yaml.safe_dump({**recipe, "objective": {"kind": "mlm", "masking": {"strategy": "words"}}}))
    bad = CliRunner().invoke(app, ["pretrain", str(path)])
    assert bad.exit_code != 0 and "objective.masking.strategy" in str(bad.exception)


def test_inputs_a_run_cannot_use_are_refused_before_its_dir_is_claimed(tmp_path: Path) -> None:
    """Each of these failed mid-run before (the run dir claimed, so the next try asked for --resume
    or --force), most with a traceback naming no file."""
    import json as json_

    from tinyplm.errors import DataError, ModelError, RecipeError
    from tinyplm.pretrain.run import preflight

    base = _recipe(tmp_path).model_dump(mode="json")
    init = make_tiny_mlm_dir(tmp_path / "init")  # BERT of 64 positions

    def with_(**changes) -> PretrainRecipe:
        raw = json_.loads(json_.dumps(base))
        for key, value in changes.items():
            section, _, name = key.partition("__")
            if name:
                raw[section][name] = value
            else:
                raw[section] = value
        return PretrainRecipe.model_validate(raw)

    scratch = {"shape": None, "tokenizer": None}
    with pytest.raises(RecipeError, match=r"corpus.max_length 128 is longer than the 64 positions .*init"):
        preflight(with_(init=str(init), corpus__max_length=128, **scratch))
    roberta = tmp_path / "roberta"
    roberta.mkdir()
    for f in init.iterdir():
        (roberta / f.name).write_bytes(f.read_bytes())
    config = json_.loads((roberta / "config.json").read_text())
    (roberta / "config.json").write_text(json_.dumps({**config, "model_type": "roberta"}))
    with pytest.raises(ModelError, match=r"model_type 'roberta': pre-training continues BERT checkpoints"):
        preflight(with_(init=str(roberta), **scratch))
    with pytest.raises(RecipeError, match=r"corpus.holdout 0.1 of the 1 texts .* holds out none"):
        preflight(with_(corpus__max_docs=1))  # one text: none to hold out
    one = tmp_path / "one"
    _corpus(one, docs=1)
    with pytest.raises(DataError, match=r"the training texts make no nsp pairs: next-sentence pairs need at least two"):
        preflight(with_(corpus__paths=[str(one)], objective={"kind": "mlm", "pairs": "nsp"}))
    assert not (tmp_path / "run").exists()


def test_a_masking_rate_that_masks_no_held_out_token_is_refused_before_training(tmp_path: Path) -> None:
    """With no held-out token masked, pretrain.json reported mlm_loss and mlm_accuracy 0.0000 for
    any model, which reads as perfect."""
    recipe = _recipe(tmp_path, kind="mlm", masking={"rate": 1e-5})
    with pytest.raises(TinyplmError, match=r"objective.masking.rate 1e-05 masks no token of the \d+ held-out texts"):
        pretrain(recipe)
    assert not any((tmp_path / "run" / "checkpoints").iterdir()) and not (tmp_path / "run" / "pretrain.json").exists()


def test_a_corpus_its_tokenizer_reads_as_unknown_is_refused_before_the_run_dir(tmp_path: Path) -> None:
    """Every word of this corpus is outside the tiny tokenizer's vocabulary: masking (which never
    picks [UNK]) found no held-out token, and the advice was to mask more or hold out more, which
    could not help, after the run dir was made. The tokenizer is now named, before anything is written."""
    recipe = _recipe(tmp_path, kind="mlm")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "a.txt").write_text("\n\n".join(" ".join(["жёлтый"] * 12) + " ." for _ in range(40)), encoding="utf-8")
    recipe = recipe.model_copy(update={"corpus": recipe.corpus.model_copy(update={"paths": [str(foreign)]})})
    with pytest.raises(TinyplmError, match=r"tokenizer .*tok reads \d+% of the corpus's word pieces as its unknown "
                                           r"token \[UNK\].*train a tokenizer on this corpus"):
        pretrain(recipe)
    assert not (tmp_path / "run").exists()
