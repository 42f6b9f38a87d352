"""Teacher-logit cache: compute once, hit afterwards, key covers teacher, data, length, precision."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForSequenceClassification, BertTokenizerFast

import tinyplm.distill.cache as cache_mod
from tinyplm.distill.cache import cache_key, cached_teacher_logits
from tinyplm.models.infer import predict_logits
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import Encoded, encode_split

TEXTS = [
    "the movie was good",
    "a very very boring plot and a dull actor",
    "bad",
    "this film is the best story",
    "not fun",
]


def make_split(texts: list[str]) -> Split:
    """A split of the given texts with alternating labels."""
    return Split("train", [Example(t, None, i % 2, i + 1) for i, t in enumerate(texts)], Path("mem"))


@pytest.fixture
def teacher_and_tokenizer(tiny_model_dir: Path):
    """The tiny random classifier (eval mode) and a WordPiece tokenizer over its 99-token vocab.

    Built from vocab.txt with ``vocab=`` (transformers 5 ignores ``vocab_file=``, which leaves a
    5-token tokenizer mapping every word to [UNK]); the data tests need real word ids.
    """
    model = AutoModelForSequenceClassification.from_pretrained(tiny_model_dir).eval()
    tok = BertTokenizerFast(vocab=str(tiny_model_dir / "vocab.txt"), do_lower_case=True)
    assert len(tok) == 99 and tok.unk_token_id not in tok("the movie was good")["input_ids"]
    return model, tok


def count_forwards(model: torch.nn.Module) -> list[int]:
    """Register a forward hook on ``model``; the returned one-item list counts calls."""
    calls = [0]

    def hook(*_args) -> None:
        calls[0] += 1

    model.register_forward_hook(hook)
    return calls


def test_first_call_computes_second_call_hits(teacher_and_tokenizer, tmp_path: Path, monkeypatch) -> None:
    model, tok = teacher_and_tokenizer
    enc = encode_split(make_split(TEXTS), tok, max_length=32)
    calls = count_forwards(model)
    logits, hit = cached_teacher_logits(model, "fp-a", enc, tmp_path, batch_size=2)
    assert hit is False and calls[0] > 0
    files = list((tmp_path / "logits").glob("*.safetensors"))
    assert [f.name for f in files] == [f"{cache_key('fp-a', enc, False)}.safetensors"]
    assert not list((tmp_path / "logits").glob("*.tmp"))

    # The second call must not run the model at all.
    before = calls[0]

    def no_predict(*_a, **_k):
        raise AssertionError("cache hit should not call predict_logits")

    monkeypatch.setattr(cache_mod, "predict_logits", no_predict)
    again, hit2 = cached_teacher_logits(model, "fp-a", enc, tmp_path, batch_size=2)
    assert hit2 is True and calls[0] == before
    assert torch.equal(again, logits)
    assert again.dtype == torch.float32 and again.shape == (len(TEXTS), 2)


def test_logits_equal_predict_logits_in_original_order(teacher_and_tokenizer, tmp_path: Path) -> None:
    model, tok = teacher_and_tokenizer
    enc = encode_split(make_split(TEXTS), tok, max_length=32)
    logits, _ = cached_teacher_logits(model, "fp", enc, tmp_path, batch_size=2)
    torch.testing.assert_close(logits, predict_logits(model, enc, batch_size=64), atol=1e-5, rtol=1e-5)
    # Original order: row i is example i run on its own.
    with torch.no_grad():
        for i, ids in enumerate(enc.input_ids):
            one = model(input_ids=torch.tensor([ids]), token_type_ids=torch.tensor([enc.token_type_ids[i]])).logits
            torch.testing.assert_close(logits[i], one[0], atol=1e-5, rtol=1e-5)


def test_key_changes_with_teacher_fingerprint(teacher_and_tokenizer) -> None:
    _, tok = teacher_and_tokenizer
    enc = encode_split(make_split(TEXTS), tok, max_length=32)
    assert cache_key("fp-a", enc, False) == cache_key("fp-a", enc, False)
    assert cache_key("fp-a", enc, False) != cache_key("fp-b", enc, False)


def test_key_changes_with_one_changed_example(teacher_and_tokenizer) -> None:
    _, tok = teacher_and_tokenizer
    enc = encode_split(make_split(TEXTS), tok, max_length=32)
    changed = list(TEXTS)
    changed[2] = "awful"
    other = encode_split(make_split(changed), tok, max_length=32)
    assert cache_key("fp", enc, False) != cache_key("fp", other, False)


def test_key_changes_with_max_length_when_truncation_changes(teacher_and_tokenizer) -> None:
    _, tok = teacher_and_tokenizer
    long_enc = encode_split(make_split(TEXTS), tok, max_length=32)
    short_enc = encode_split(make_split(TEXTS), tok, max_length=8)
    assert long_enc.input_ids != short_enc.input_ids  # the second text is longer than 8 pieces
    assert max(map(len, short_enc.input_ids)) == 8
    assert cache_key("fp", long_enc, False) != cache_key("fp", short_enc, False)


def test_key_changes_with_bf16(teacher_and_tokenizer) -> None:
    _, tok = teacher_and_tokenizer
    enc = encode_split(make_split(TEXTS), tok, max_length=32)
    assert cache_key("fp", enc, False) != cache_key("fp", enc, True)


def test_changed_teacher_misses_and_writes_a_second_entry(teacher_and_tokenizer, tmp_path: Path) -> None:
    model, tok = teacher_and_tokenizer
    enc = encode_split(make_split(TEXTS), tok, max_length=32)
    cached_teacher_logits(model, "fp-a", enc, tmp_path)
    _, hit = cached_teacher_logits(model, "fp-b", enc, tmp_path)
    assert hit is False
    assert len(list((tmp_path / "logits").glob("*.safetensors"))) == 2


def test_entry_of_wrong_length_is_recomputed(teacher_and_tokenizer, tmp_path: Path) -> None:
    model, tok = teacher_and_tokenizer
    enc = encode_split(make_split(TEXTS), tok, max_length=32)
    from safetensors.torch import save_file

    path = tmp_path / "logits" / f"{cache_key('fp', enc, False)}.safetensors"
    path.parent.mkdir(parents=True)
    save_file({"logits": torch.zeros(2, 2)}, str(path))
    logits, hit = cached_teacher_logits(model, "fp", enc, tmp_path)
    assert hit is False and logits.shape == (len(TEXTS), 2)


def test_empty_encoded_key_is_stable() -> None:
    empty = Encoded([], [], torch.zeros(0, dtype=torch.long), 0)
    assert cache_key("fp", empty, False) == cache_key("fp", empty, False)
    assert len(cache_key("fp", empty, False)) == 32


def count_examples(monkeypatch) -> list[int]:
    """Wrap the cache module's ``predict_logits``; the returned one-item list counts the examples
    sent through the teacher."""
    seen, real = [0], cache_mod.predict_logits

    def counting(model, enc, **kw):
        seen[0] += len(enc)
        return real(model, enc, **kw)

    monkeypatch.setattr(cache_mod, "predict_logits", counting)
    return seen


def test_known_rows_run_only_new_examples(teacher_and_tokenizer, tmp_path: Path, monkeypatch) -> None:
    """A second set repeating examples of the first (as the augmented set repeats the training
    set) runs the teacher on its new examples only, and every row equals the teacher's own."""
    model, tok = teacher_and_tokenizer
    train = encode_split(make_split(TEXTS), tok, max_length=32)
    new = ["the plot was boring", "a good actor"]
    # the augmented layout: new copies first, then training examples again, one of them twice
    mixed = encode_split(make_split(new + TEXTS[3:] + TEXTS[:1] + TEXTS[:1]), tok, max_length=32)
    known = cache_mod.KnownRows()
    seen = count_examples(monkeypatch)
    first, hit = cached_teacher_logits(model, "fp", train, tmp_path, batch_size=2, known=known)
    assert hit is False and seen[0] == len(TEXTS) and len(known) == len(TEXTS)
    second, hit2 = cached_teacher_logits(model, "fp", mixed, tmp_path, batch_size=2, known=known)
    assert hit2 is False and seen[0] == len(TEXTS) + len(new)
    torch.testing.assert_close(second, predict_logits(model, mixed, batch_size=64), atol=1e-5, rtol=1e-5)
    assert torch.equal(second[len(new):len(new) + 2], first[3:5])
    # and the assembled set went to the disk cache like any other
    again, hit3 = cached_teacher_logits(model, "fp", mixed, tmp_path, batch_size=2)
    assert hit3 is True and torch.equal(again, second)


def test_known_rows_learn_from_cache_hits_and_key_on_token_types(teacher_and_tokenizer, tmp_path: Path,
                                                                 monkeypatch) -> None:
    """Rows read from the disk cache are remembered too; the same ids with other token types (a
    different pair split) are a different example."""
    model, tok = teacher_and_tokenizer
    train = encode_split(make_split(TEXTS), tok, max_length=32)
    cached_teacher_logits(model, "fp", train, tmp_path, batch_size=2)  # fills the disk cache only
    known = cache_mod.KnownRows()
    seen = count_examples(monkeypatch)
    cached_teacher_logits(model, "fp", train, tmp_path, batch_size=2, known=known)
    assert seen[0] == 0 and len(known) == len(TEXTS)
    retyped = Encoded(train.input_ids[:2], [[1] * len(t) for t in train.token_type_ids[:2]], train.labels[:2],
                      train.pad_id)
    out, _ = cached_teacher_logits(model, "fp", retyped, tmp_path, batch_size=2, known=known)
    assert seen[0] == 2 and out.shape == (2, 2)
