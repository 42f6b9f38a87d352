"""Compress steps on RoBERTa and DeBERTa-v2 classifiers (tiny, random): each step that applies runs
through the role table, and its result saves, reloads into its own family with identical logits,
and has the parameter count its config describes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from pydantic import TypeAdapter
from transformers import (
    DebertaV2Config,
    DebertaV2ForSequenceClassification,
    RobertaConfig,
    RobertaForSequenceClassification,
)

from conftest import make_tiny_model_dir
from tinyplm.compress import CompressContext, apply_step
from tinyplm.config.compress import CompressStep
from tinyplm.evaluate.size import count_params
from tinyplm.models import load_classifier, save_model
from tinyplm.models.shape import params_from_config
from tinyplm.models.student import DEBERTA_ATTENTION
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import collate, encode_split, model_inputs

LABELS = ("negative", "positive")
TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
            type_vocab_size=2, num_labels=2, pad_token_id=0)  # the tokenizer's [PAD], as build_student sets it
STEPS = {
    "prune_heads": {"keep": 0.5, "score_batches": 2},
    "prune_ffn": {"keep": 0.5, "score_batches": 2, "scope": "global"},
    "drop_layers": {"count": 1, "score_batches": 2},
    "share": {"mode": "all"},
    "svd": {"ratio": 0.25},
    "factorize_embeddings": {"rank": 8},
    "trim_vocab": {},
    "dynamic_int8": {},
}
FAMILIES = {
    "roberta": lambda: RobertaForSequenceClassification(RobertaConfig(**TINY, max_position_embeddings=66)),
    "deberta": lambda: DebertaV2ForSequenceClassification(DebertaV2Config(
        **TINY, max_position_embeddings=64, **{**DEBERTA_ATTENTION, "position_buckets": 8, "share_att_key": False})),
}


def _family_dir(tmp_path: Path, family: str) -> Path:
    """A saved tiny classifier of ``family`` with the tiny BERT's tokenizer (a teacher's)."""
    _, tok = load_classifier(make_tiny_model_dir(tmp_path / "bert"), LABELS, False)
    torch.manual_seed(0)
    return save_model(FAMILIES[family]().eval(), tok, tmp_path / family)


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("kind", list(STEPS))
def test_step_result_reloads_in_its_family(tmp_path, family, kind):
    model, tok = load_classifier(_family_dir(tmp_path, family), LABELS, False)
    cls = type(model)
    rows = [Example(f"good movie {i} fun" if i % 2 else f"bad dull film {i}", None, i % 2, i) for i in range(48)]
    enc = encode_split(Split("train", rows, tmp_path), tok, 16)
    step = TypeAdapter(CompressStep).validate_python({"kind": kind, **STEPS[kind]})
    before = count_params(model)[0]
    ctx = CompressContext(enc, None, False, tmp_path / "work", tokenizer=tok, evals={"dev": enc},
                          texts=[(r.text, None) for r in rows],
                          reencode=lambda t: (encode_split(Split("train", rows, tmp_path), t, 16),
                                              {"dev": encode_split(Split("dev", rows, tmp_path), t, 16)}),
                          timer=lambda models, _: {name: float(i) for i, name in enumerate(models)})
    out, _ = apply_step(model, step, ctx)
    batch = model_inputs(collate(ctx.train, list(range(8))))
    loaded, _ = load_classifier(save_model(out, ctx.tokenizer, tmp_path / "saved"), LABELS, False)
    assert loaded.config.model_type == cls.config_class.model_type
    with torch.no_grad():
        assert torch.allclose(out.eval()(**batch).logits, loaded(**batch).logits, atol=1e-5)
    after = count_params(loaded)[0]
    assert after == params_from_config(loaded.config)
    assert after < before if kind not in ("dynamic_int8",) else after == before


def test_roberta_positions_follow_a_moved_padding_id():
    """Trimming can renumber RoBERTa's padding id; its positions count from it, so the position rows
    move along and the embeddings of the renumbered ids are unchanged."""
    from transformers import RobertaConfig
    from transformers.models.roberta.modeling_roberta import RobertaEmbeddings

    from tinyplm.compress.vocab import move_positions

    torch.manual_seed(0)
    emb = RobertaEmbeddings(RobertaConfig(**{**TINY, "pad_token_id": 3}, max_position_embeddings=20)).eval()
    ids = torch.tensor([[5, 6, 7, 3, 3]])
    before = emb(input_ids=ids)
    with torch.no_grad():  # the same word rows under ids where the padding id became 0
        emb.word_embeddings.weight[0] = emb.word_embeddings.weight[3]
    move_positions(emb, 0)
    after = emb(input_ids=torch.where(ids == 3, 0, ids))
    assert emb.padding_idx == 0 and torch.allclose(before, after, atol=1e-6)
