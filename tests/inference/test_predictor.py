"""The Predictor gives tinyplm evaluate's predictions, for every head, whatever the batching."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import make_tiny_model_dir
from helpers_serve import TAGS, make_regression_dir, make_tiny_head_dir, sentences, write_conll, write_squad
from tinyplm.evaluate.model_eval import span_prediction_texts
from tinyplm.inference.predictor import Predictor, length_groups
from tinyplm.inference.records import QAInput, TextInput, TokensInput
from tinyplm.models import load_classifier
from tinyplm.models.infer import logits_to_predictions, predict_logits
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.conll import read_conll
from tinyplm.tasks.encoding import encode_split, padded_width
from tinyplm.tasks.heads import Head
from tinyplm.tasks.squad import read_squad
from tinyplm.tasks.tagging import tags_from_logits


def test_labels_equal_evaluates_in_any_batching(tmp_path: Path) -> None:
    model_dir = make_tiny_model_dir(tmp_path / "m", num_labels=3)
    texts = sentences(50)
    split = Split("dev", [Example(t, None, 0) for t in texts], tmp_path / "dev")
    model, tok = load_classifier(model_dir, ("a", "b", "c"), False)
    expected = logits_to_predictions(predict_logits(model, encode_split(split, tok, 64)), False)
    for batch_size, grouped in ((64, False), (3, False), (32, True)):
        p = Predictor.load(model_dir, batch_size=batch_size, split_by_length=grouped)
        assert p.pieces is not None  # single texts go through the piece memo, evaluate's through the tokenizer
        preds = p.predict([TextInput(t) for t in texts])
        assert [p.info.labels.index(x.label) for x in preds] == expected.tolist(), (batch_size, grouped)
        assert all(abs(sum(x.scores.values()) - 1) < 1e-5 for x in preds)


def test_a_text_alone_is_encoded_alone_even_beside_pairs(tmp_path: Path) -> None:
    p = Predictor.load(make_tiny_model_dir(tmp_path / "m"))
    alone = p.predict([TextInput("a good film")])[0]
    mixed = p.predict([TextInput("x y", "z"), TextInput("a good film"), TextInput("bad", "plot")])
    assert mixed[1].scores == pytest.approx(alone.scores, abs=1e-6)


def test_regression_values(tmp_path: Path) -> None:
    model_dir = make_regression_dir(tmp_path / "reg")
    p = Predictor.load(model_dir)
    texts = sentences(5)
    model, tok = load_classifier(model_dir, (), True)
    split = Split("dev", [Example(t, None, 0.0) for t in texts], tmp_path / "dev")
    expected = predict_logits(model, encode_split(split, tok, 64))[:, 0]
    assert [x.value for x in p.predict([TextInput(t) for t in texts])] == pytest.approx(expected.tolist(), abs=1e-6)


def test_answers_and_offsets_equal_evaluates(tmp_path: Path) -> None:
    model_dir = make_tiny_head_dir(tmp_path / "qa", "span")
    squad = read_squad(write_squad(tmp_path / "dev.json", 12))
    options = {"doc_stride": 16, "max_query_length": 8}
    split = Split("dev", squad.examples, squad.path, Head.SPAN, options)
    model, tok = load_classifier(model_dir, (), False, Head.SPAN)
    enc = encode_split(split, tok, 40)  # short windows: long contexts get several
    assert len(enc) > len(squad.examples)
    expected = span_prediction_texts(split, enc, predict_logits(model, enc))
    p = Predictor.load(model_dir, batch_size=5, max_length=40, doc_stride=16, max_query_length=8)
    preds = p.predict([QAInput(ex.question, ex.context, ex.id) for ex in squad.examples])
    assert {x.id: x.answer for x in preds} == expected
    for ex, x in zip(squad.examples, preds, strict=True):
        assert ex.context[x.start:x.end] == x.answer


def test_tags_equal_evaluates(tmp_path: Path) -> None:
    model_dir = make_tiny_head_dir(tmp_path / "ner", "token")
    sentences_ = read_conll(write_conll(tmp_path / "valid.txt", 20))
    split = Split("dev", sentences_, tmp_path / "valid.txt", Head.TOKEN, {"tags": TAGS})
    model, tok = load_classifier(model_dir, TAGS, False, Head.TOKEN)
    enc = encode_split(split, tok, 8)  # some sentences are cut: evaluate tags their last words O
    expected = tags_from_logits(enc.meta, predict_logits(model, enc), TAGS, [len(s.tokens) for s in sentences_])
    preds = Predictor.load(model_dir, max_length=8, batch_size=4).predict([TokensInput(s.tokens) for s in sentences_])
    assert all(len(x.tags) == len(s.tokens) for x, s in zip(preds, sentences_, strict=True))
    for i, (x, want) in enumerate(zip(preds, expected, strict=True)):
        read = max(enc.meta.words_of(i), default=-1) + 1  # the words evaluate's encoding holds
        assert list(x.tags[:read]) == want[:read]


def test_a_sentence_longer_than_the_max_length_is_tagged_in_windows(tmp_path: Path) -> None:
    """A tagger reads a long sentence in windows of words, each starting a quarter of the previous
    one back: every word's tag is the model's at its first piece in the first window that holds
    it, as if that window had been the input."""
    from conftest import WORDS

    model_dir = make_tiny_head_dir(tmp_path / "ner", "token")
    words = tuple(WORDS[i % len(WORDS)] for i in range(40))  # one piece each: 14 fit in 16 with [CLS], [SEP]
    predictor = Predictor.load(model_dir, max_length=16, batch_size=4)
    tags = predictor.predict([TokensInput(words)])[0].tags
    assert len(tags) == 40

    def alone(start: int) -> tuple[str, ...]:
        return predictor.predict([TokensInput(words[start:start + 14])])[0].tags

    starts, covered = [0], 14  # windows of 14 words, the next from 14 - 14 // 4 = 11 words on
    while covered < 40:
        starts.append(starts[-1] + 11)
        covered = starts[-1] + 14
    assert starts == [0, 11, 22, 33]
    for start in starts:
        first_new = 0 if start == 0 else start + 3  # the words before were tagged by the window before
        window = alone(start)
        assert tags[first_new:start + 14] == window[first_new - start:len(window)]


def test_a_tokenizer_that_cuts_on_the_left_tags_the_same_words(tmp_path: Path) -> None:
    """A tagger whose tokenizer was saved with truncation_side left lost a long sentence's first
    words: the windows took the words up to the last one read as read, so the dropped first words
    were tagged O without being read. Words are read from the first, whatever the tokenizer says."""
    import json

    from conftest import WORDS

    model_dir = make_tiny_head_dir(tmp_path / "ner", "token")
    words = tuple(WORDS[i % len(WORDS)] for i in range(40))
    right = Predictor.load(model_dir, max_length=16).predict([TokensInput(words)])[0].tags
    config = json.loads((model_dir / "tokenizer_config.json").read_text())
    (model_dir / "tokenizer_config.json").write_text(json.dumps({**config, "truncation_side": "left"}))
    left = Predictor.load(model_dir, max_length=16)
    assert left.tokenizer.truncation_side == "left"  # the tokenizer is loaded as saved
    assert left.predict([TokensInput(words)])[0].tags == right


def test_length_groups_cover_everything_once_and_beat_one_pass() -> None:
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 60, size=32).tolist()
    groups = length_groups(lengths, overhead=64, largest=32)
    assert sorted(i for g in groups for i in g) == list(range(32))

    def cost(gs):
        return sum(64 + len(g) * padded_width(max(lengths[i] for i in g)) for g in gs)

    assert cost(groups) <= cost([list(range(32))])
    assert all(max(lengths[i] for i in a) <= min(lengths[i] for i in b)
               for a, b in zip(groups, groups[1:], strict=False))
    assert length_groups([10, 10, 11], overhead=64) == [[0, 1, 2]]  # alike: one pass
    assert max(len(g) for g in length_groups([5] * 10, overhead=1000, largest=4)) == 4


def test_wrong_input_kind_is_refused(tmp_path: Path) -> None:
    p = Predictor.load(make_tiny_model_dir(tmp_path / "m"))
    with pytest.raises(ValueError, match="takes TextInput, got QAInput"):
        p.predict([QAInput("q", "c")])
    assert p.predict([]) == []


@pytest.mark.parametrize("arch", ["tfidf_lr", "bilstm", "elmo_bilstm"])
def test_model_family_students_predict_as_evaluate_does(tmp_path: Path, arch: str) -> None:
    """TF-IDF, (Bi)LSTM and ELMo students keep a word vocabulary, not a transformer tokenizer."""
    import torch

    from tinyplm.models.classic import FamilyConfig, WordTokenizer, build_module
    from tinyplm.models.classic.tfidf import fit_tfidf
    from tinyplm.models.io import save_model

    texts = sentences(40)
    torch.manual_seed(0)
    if arch == "tfidf_lr":
        model, tok, _ = fit_tfidf(texts, [i % 2 for i in range(len(texts))], 2)
    elif arch == "elmo_bilstm":
        from tinyplm.models.classic.elmo import ElmoBiLstm

        tok = WordTokenizer.build(texts, 200)
        bilm = {"hidden": 8, "char_dim": 4, "filters": [[1, 4], [2, 4]], "max_chars": 8}
        model = ElmoBiLstm(FamilyConfig(arch=arch, vocab_size=len(tok), hidden=4, bilm=bilm, num_labels=2), tok.vocab)
        model.record_params()
    else:
        tok = WordTokenizer.build(texts, 200)
        model = build_module(FamilyConfig(arch=arch, vocab_size=len(tok), embed_dim=8, hidden=4, num_labels=2))
    model.config.id2label = {0: "no", 1: "yes"}
    model.config.tinyplm_task = {"name": "tvtropes_spoilers", "max_length": 24}
    save_model(model.eval(), tok, tmp_path / "m")
    p = Predictor.load(tmp_path / "m")
    assert p.info.labels == ("no", "yes") and p.info.max_length == 24 and p.info.task == "tvtropes_spoilers"
    loaded, tok2 = load_classifier(tmp_path / "m", ("no", "yes"), False)
    split = Split("dev", [Example(t, None, 0) for t in texts], tmp_path / "dev")
    expected = torch.softmax(predict_logits(loaded, encode_split(split, tok2, 24)), -1)[:, 1]
    got = [x.scores["yes"] for x in p.predict([TextInput(t) for t in texts])]
    np.testing.assert_allclose(got, expected.numpy(), atol=1e-6)
    assert len(set(np.round(got, 6))) > 1  # the model tells the sentences apart


def test_a_spoiler_model_is_given_its_text_as_the_task_reader_gives_it(tmp_path: Path, monkeypatch) -> None:
    """Markup gaps are closed (tasks.spoilers.text_cleanup) in text and pair for a spoiler task's
    model, as training and evaluate read them; another task's model gets the text as given."""
    import tinyplm.inference.predictor as predictor

    seen: list[tuple[str, str | None]] = []

    def spy(split, tokenizer, max_length, limit=None, pieces=None):
        seen.extend((e.text, e.text_pair) for e in split.examples)
        return encode_split(split, tokenizer, max_length, limit, pieces)

    monkeypatch.setattr(predictor, "encode_split", spy)
    for task, expected in (("tvtropes_spoilers", ("He dies at the end.", "A good read.")),
                           ("sst2", ("He dies  at the end .", " A good  read ."))):
        model_dir = make_tiny_model_dir(tmp_path / task)
        model, tok = load_classifier(model_dir, ("0", "1"), False)
        model.config.tinyplm_task = {"name": task, "max_length": 24}
        model.save_pretrained(model_dir)
        seen.clear()
        Predictor.load(model_dir).predict([TextInput("He dies  at the end .", " A good  read .")])
        assert seen == [expected], task


@pytest.mark.parametrize("positions", [60, 61, 63])
def test_a_model_whose_positions_are_no_multiple_of_eight_reads_them_all(tmp_path: Path, positions: int) -> None:
    """Batches are padded to a multiple of 8 tokens; a model of 60 positions read at its own length
    crashed on any text that long (padded to 64, past its position table), in predict, evaluate
    and training alike. Padding now stops at the max length."""
    import json

    from transformers import BertConfig, BertForSequenceClassification

    from tinyplm.tasks.base import Example, Split
    from tinyplm.tasks.encoding import collate, encode_split

    model_dir = make_tiny_model_dir(tmp_path / "m")
    cfg = json.loads((model_dir / "config.json").read_text())
    model = BertForSequenceClassification(BertConfig(**{**cfg, "max_position_embeddings": positions}))
    model.save_pretrained(model_dir)
    long_text = " ".join(["good"] * 200)
    p = Predictor.load(model_dir, max_length=positions)
    assert p.info.max_length == positions
    preds = p.predict([TextInput(long_text), TextInput("a good film")])
    assert len(preds) == 2 and all(0.0 <= s <= 1.0 for s in preds[0].scores.values())
    enc = encode_split(Split("x", [Example(long_text, None, 0)], Path("x")), p.tokenizer, positions)
    assert collate(enc, [0])["input_ids"].shape[1] == positions
