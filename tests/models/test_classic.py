"""Classic students on tiny data: word tokenizer, (Bi)LSTM pooling and masking, TF-IDF +
logistic regression against scikit-learn, GloVe's loss, and save -> reload identity."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tinyplm.models.classic import FamilyConfig, WordTokenizer, build_module, load_family
from tinyplm.models.classic.lstm import LstmClassifier, reverse_within
from tinyplm.models.classic.tfidf import documents, fit_tfidf
from tinyplm.models.classic.vectors import WordVectors, cooccurrence, fit_glove, glove_loss
from tinyplm.models.io import save_model
from tinyplm.models.loading import load_classifier
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import collate, encode_split, model_inputs

TEXTS = ["The plot twist: he dies!", "A great, fun movie.", "She was the killer all along", "Boring film.",
         "the ending reveals the killer", "Lovely acting and a fun story", "He dies at the end", "Not bad at all"]
LABELS = [1, 0, 1, 0, 1, 0, 1, 0]


def _batch(tok, texts=TEXTS):
    enc = encode_split(Split("dev", [Example(t, None, 0) for t in texts], None), tok, 32)
    return model_inputs(collate(enc, range(len(texts))))


def test_word_tokenizer_vocabulary_and_pairs():
    tok = WordTokenizer.build(TEXTS, max_size=20, min_count=2)
    assert tok.vocab[:3] == ["[PAD]", "[UNK]", "[SEP]"] and len(tok) == 3 + 9  # 9 words seen twice
    assert tok.vocab[3] == "the"  # the most frequent word first
    ids, types = tok.encode("The killer dies", "zzz unseen")
    assert ids[0] == tok.vocab.index("the") and ids[3] == 2 and ids[4] == 1 and types == [0, 0, 0, 1, 1, 1]
    assert tok.encode("") == ([1], [0])  # never empty
    assert tok(["x b c d e"], max_length=2)["input_ids"] == [[1, 1]]
    assert WordTokenizer.build(TEXTS, 20, 2).vocab == tok.vocab
    assert len(WordTokenizer.build(TEXTS, 4, 2)) == 3 + 4  # deterministic


def test_reverse_within_keeps_padding_in_place():
    x = torch.arange(8.0).view(2, 4, 1)
    out = reverse_within(x, torch.tensor([3, 4]))
    assert out[:, :, 0].tolist() == [[2.0, 1.0, 0.0, 3.0], [7.0, 6.0, 5.0, 4.0]]
    assert torch.equal(reverse_within(out, torch.tensor([3, 4])), x)


@pytest.mark.parametrize("pooling", ["max", "mean", "attention"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_logits_ignore_padding(pooling, bidirectional):
    torch.manual_seed(0)
    cfg = FamilyConfig(arch="bilstm" if bidirectional else "lstm", vocab_size=20, embed_dim=6, hidden=5, layers=2,
                       bidirectional=bidirectional, pooling=pooling, dropout=0.0, num_labels=2)
    model = LstmClassifier(cfg).eval()
    ids = torch.tensor([[4, 5, 6]])
    padded = torch.tensor([[4, 5, 6, 0, 0], [7, 8, 0, 0, 0]])
    mask = (padded > 0).long()
    alone = model(ids, torch.ones_like(ids)).logits
    together = model(padded, mask).logits
    assert together.shape == (2, 2)
    torch.testing.assert_close(together[0], alone[0], atol=1e-6, rtol=0)


def test_tfidf_logits_match_scikit_learn():
    model, tok, info = fit_tfidf(TEXTS, LABELS, 2, ngram_max=2, balanced=True)
    assert info["features"] == len(tok) - 3
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    docs = documents(tok, TEXTS)
    vec = TfidfVectorizer(analyzer=lambda d: d)
    x = vec.fit_transform(docs)
    lr = LogisticRegression(class_weight="balanced", random_state=0, max_iter=1000).fit(x, LABELS)
    new = ["the killer dies", "unseen words only"]
    expected = lr.predict_proba(vec.transform(documents(tok, new)))[:, 1]
    probs = torch.softmax(model(**_batch(tok, new)).logits, -1)[:, 1].detach().numpy()
    np.testing.assert_allclose(probs, expected, atol=1e-5)


def test_glove_loss_on_a_hand_made_matrix():
    w = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    v = torch.tensor([[0.5, 0.5], [1.0, -1.0]])
    b, c = torch.tensor([[0.1], [0.2]]), torch.tensor([[0.0], [-0.3]])
    i, j, x = torch.tensor([0, 0, 1]), torch.tensor([1, 0, 0]), torch.tensor([2.0, 200.0, 50.0])
    by_hand = 0.0
    for a, o, n in zip(i.tolist(), j.tolist(), x.tolist(), strict=True):
        f = min(1.0, (n / 100.0) ** 0.75)
        by_hand += f * (float(w[a] @ v[o]) + float(b[a, 0]) + float(c[o, 0]) - np.log(n)) ** 2
    assert glove_loss(w, v, b, c, i, j, x).item() == pytest.approx(by_hand, rel=1e-6)


def test_glove_fits_log_counts():
    kept, i, j, x = cooccurrence([["a", "b", "a", "c"], ["b", "c"]], vocab_size=3, window=2)
    assert kept == ["a", "b", "c"]
    counts = {(kept[a], kept[b]): float(n) for a, b, n in zip(i, j, x, strict=True)}
    assert counts[("a", "b")] == pytest.approx(2.0) and counts[("a", "c")] == pytest.approx(1.0)
    assert counts[("a", "b")] == counts[("b", "a")]
    assert ("a", "a") in counts and counts[("a", "a")] == pytest.approx(1.0)  # both directions, as cooccur.c counts
    torch.manual_seed(0)
    _, start = fit_glove(3, i, j, x, dim=4, epochs=1, lr=1e-9, batch_size=64)
    vectors, end = fit_glove(3, i, j, x, dim=4, epochs=300, lr=0.2, batch_size=64)
    assert vectors.shape == (3, 4) and end < 1e-3 * start  # the weighted least squares are solved
    table, found = WordVectors(kept, vectors).table_for(["[PAD]", "[UNK]", "[SEP]", "a", "zz"])
    assert found == 0.5 and torch.equal(table[0], torch.zeros(4)) and torch.allclose(table[3], torch.tensor(vectors[0]))


@pytest.mark.parametrize("arch", ["bilstm", "tfidf_lr"])
def test_save_and_reload_give_identical_logits(tmp_path, arch):
    if arch == "tfidf_lr":
        model, tok, _ = fit_tfidf(TEXTS, LABELS, 2, id2label={0: "no", 1: "yes"})
    else:
        tok = WordTokenizer.build(TEXTS, 50)
        model = build_module(FamilyConfig(arch="bilstm", vocab_size=len(tok), embed_dim=8, hidden=4,
                                          pooling="attention", num_labels=2)).eval()
    model.config.tinyplm_task = {"name": "tvtropes_spoilers", "max_length": 32}
    save_model(model, tok, tmp_path / "m")
    loaded, tok2 = load_classifier(tmp_path / "m", ("no", "yes"), False, "sequence")
    assert type(loaded) is type(model) and tok2.vocab == tok.vocab
    assert loaded.config.tinyplm_task["name"] == "tvtropes_spoilers"
    assert torch.equal(loaded(**_batch(tok2)).logits, model(**_batch(tok)).logits)
    assert loaded.num_parameters() == model.num_parameters() > 0


def test_reload_refuses_a_vocabulary_of_another_model(tmp_path):
    tok = WordTokenizer.build(TEXTS, 50)
    model = build_module(FamilyConfig(arch="lstm", vocab_size=5, embed_dim=4, hidden=4, num_labels=2))
    save_model(model, tok, tmp_path / "m")
    from tinyplm.errors import ModelError

    with pytest.raises(ModelError, match="word_tokenizer.json: has"):
        load_family(tmp_path / "m", ("a", "b"))
    with pytest.raises(ModelError, match="2 outputs but the task needs 3"):
        load_family(tmp_path / "m", ("a", "b", "c"))


def _any_model(arch: str, tmp_path):
    """A small model of ``arch`` and its tokenizer."""
    torch.manual_seed(0)
    if arch == "tfidf_lr":
        return fit_tfidf(TEXTS, LABELS, 2)[:2]
    if arch == "feature_bilstm":
        from transformers import AutoModel, AutoTokenizer

        from conftest import make_tiny_model_dir
        from tinyplm.models.classic.features import feature_bilstm

        src = make_tiny_model_dir(tmp_path / "bert")
        return feature_bilstm(AutoModel.from_pretrained(str(src)), 2, hidden=4, feature_layers=2).eval(), \
            AutoTokenizer.from_pretrained(str(src))
    tok = WordTokenizer.build(TEXTS, 50)
    if arch == "elmo_bilstm":
        from tinyplm.models.classic.elmo import ElmoBiLstm

        bilm = {"hidden": 8, "char_dim": 4, "filters": [[1, 4], [2, 4]], "max_chars": 8}
        model = ElmoBiLstm(FamilyConfig(arch=arch, vocab_size=len(tok), hidden=4, bilm=bilm, num_labels=2), tok.vocab)
        model.record_params()
        return model.eval(), tok
    return build_module(FamilyConfig(arch="bilstm", vocab_size=len(tok), embed_dim=8, hidden=4, layers=2,
                                     pooling="max", num_labels=2)).eval(), tok


@pytest.mark.parametrize("arch", ["bilstm", "tfidf_lr", "elmo_bilstm", "feature_bilstm"])
def test_onnx_export_matches_torch_and_reloads(tmp_path, arch):
    from tinyplm.compress.onnx_quant import onnx_fp32

    model, tok = _any_model(arch, tmp_path)
    (tmp_path / "graph").mkdir()
    ort = onnx_fp32(model, tmp_path / "graph")
    batch = _batch(tok)  # sentences of different lengths: padding inside the batch
    torch.testing.assert_close(ort(**batch).logits, model(**batch).logits, atol=1e-5, rtol=1e-4)
    save_model(ort, tok, tmp_path / "onnx")
    loaded, _ = load_classifier(tmp_path / "onnx", ("0", "1"), False, "sequence")
    torch.testing.assert_close(loaded(**batch).logits, model(**batch).logits, atol=1e-5, rtol=1e-4)
    assert loaded.num_parameters() == model.num_parameters()


def test_feature_bilstm_trains_only_its_head_and_reloads(tmp_path):
    from transformers import AutoModel, AutoTokenizer

    from conftest import make_tiny_model_dir
    from tinyplm.models.classic.features import feature_bilstm

    src = make_tiny_model_dir(tmp_path / "bert")
    encoder, tok = AutoModel.from_pretrained(str(src)), AutoTokenizer.from_pretrained(str(src))
    torch.manual_seed(0)
    model = feature_bilstm(encoder, 2, hidden=4, feature_layers=2).eval()
    assert model.config.layers == 2 and model.head.lstm.forward_layers[0].input_size == 2 * 32
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(n.startswith("head.") for n in trainable)
    batch = _batch(tok, ["the movie was good", "bad plot"])
    assert model(**batch).logits.shape == (2, 2)
    save_model(model, tok, tmp_path / "m")
    loaded, tok2 = load_classifier(tmp_path / "m", ("0", "1"), False, "sequence")
    assert torch.equal(loaded(**_batch(tok2, ["the movie was good", "bad plot"])).logits, model(**batch).logits)
    with pytest.raises(ValueError, match="feature_layers 3 > the encoder's 2 layers"):
        feature_bilstm(encoder, 2, feature_layers=3)


def test_scalar_mix_weights_sum_to_one_and_get_gradients():
    from tinyplm.models.classic.elmo import ScalarMix

    mix = ScalarMix(3)
    with torch.no_grad():
        mix.scalars.copy_(torch.tensor([0.5, -1.0, 2.0]))
        mix.gamma.fill_(2.0)
    layers = [torch.full((1, 2, 4), float(k + 1)) for k in range(3)]
    out = mix(layers)
    w = mix.weights()
    assert float(w.sum()) == pytest.approx(1.0)
    torch.testing.assert_close(out, 2.0 * sum(w[k] * layers[k] for k in range(3)))
    out.sum().backward()
    assert mix.scalars.grad is not None and mix.scalars.grad.abs().sum() > 0 and mix.gamma.grad.abs() > 0


def test_bilm_learns_and_its_frozen_layers_feed_the_classifier(tmp_path):
    from tinyplm.models.classic.elmo import BiLM, ElmoBiLstm, char_table

    assert char_table(["[PAD]", "[UNK]", "ab"], 5).tolist() == [[0] * 5, [1, 2, 0, 0, 0], [1, 97 + 3, 98 + 3, 2, 0]]
    small = {"hidden": 8, "char_dim": 4, "filters": [[1, 4], [2, 4]], "max_chars": 8}
    tok = WordTokenizer.build(TEXTS, 50)
    torch.manual_seed(0)
    lm = BiLM(small, tok.vocab)
    batch = _batch(tok)
    opt = torch.optim.Adam(lm.parameters(), lr=0.05)
    first = float(lm(batch["input_ids"], batch["attention_mask"]))
    for _ in range(30):
        opt.zero_grad()
        lm(batch["input_ids"], batch["attention_mask"]).backward()
        opt.step()
    assert float(lm(batch["input_ids"], batch["attention_mask"])) < 0.7 * first  # it learns the sentences
    cfg = FamilyConfig(arch="elmo_bilstm", vocab_size=len(tok), embed_dim=0, hidden=4, bilm=small, num_labels=2)
    model = ElmoBiLstm(cfg, tok.vocab)
    model.bilm.load_state_dict(lm.encoder.state_dict())
    model.record_params()
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(n.startswith(("mix.", "head.")) for n in trainable)
    model.eval()
    save_model(model, tok, tmp_path / "elmo")
    loaded, tok2 = load_classifier(tmp_path / "elmo", ("0", "1"), False, "sequence")
    assert torch.equal(loaded(**_batch(tok2)).logits, model(**batch).logits)


def test_char_cnn_normalises_real_words_over_the_batch_and_leaves_padding_out():
    from tinyplm.models.classic.elmo import CharCnn, char_table

    torch.manual_seed(0)
    cnn = CharCnn(4, [[1, 8], [2, 8]], 6)
    words = ["[PAD]", "[UNK]", "the", "a", "spoiler", "dies", "killer", "movie"]
    chars = char_table(words, 10)[torch.tensor([[2, 3, 4, 0], [5, 6, 7, 1]])]  # one padded position
    out = cnn.train()(chars)
    real = out.reshape(8, 6)[[0, 1, 2, 4, 5, 6, 7]]
    torch.testing.assert_close(real.mean(0), torch.zeros(6), atol=1e-5, rtol=0)  # the pad row is left out
    torch.testing.assert_close(real.std(0, unbiased=False), torch.ones(6), atol=1e-2, rtol=0)  # (eps)
    assert torch.equal(out[0, 3], torch.zeros(6))
    frozen = cnn.eval()(chars)  # running statistics: a word's vector no longer depends on its batch
    torch.testing.assert_close(frozen[:1, :1], cnn(chars[:1, :1]))


def test_char_cnn_trains_on_a_batch_of_one_real_word_with_its_running_statistics():
    from tinyplm.models.classic.elmo import CharCnn, char_table

    torch.manual_seed(0)
    cnn = CharCnn(4, [[1, 8], [2, 8]], 6)
    cnn.norm.running_mean.fill_(0.5)
    chars = char_table(["[PAD]", "dies"], 10)[torch.tensor([[1, 0]])]  # one word and one padded position
    before = (cnn.norm.running_mean.clone(), cnn.norm.running_var.clone())
    out = cnn.train()(chars)  # batch statistics of one word would be 0/0
    assert torch.equal(cnn.norm.running_mean, before[0]) and torch.equal(cnn.norm.running_var, before[1])
    assert torch.equal(out[0, 1], torch.zeros(6))
    torch.testing.assert_close(out[0, 0], cnn.eval()(chars)[0, 0])


def test_a_saved_family_student_passes_the_model_dir_check_only_with_its_vocabulary(tmp_path):
    from tinyplm.errors import ModelError
    from tinyplm.models.classic.words import TOKENIZER_FILE
    from tinyplm.models.loading import check_model_dir

    tok = WordTokenizer.build(TEXTS, 50)
    save_model(build_module(FamilyConfig(arch="lstm", vocab_size=len(tok), embed_dim=4, hidden=4, num_labels=2)),
               tok, tmp_path / "m")
    assert check_model_dir(tmp_path / "m")["model_type"] == "tinyplm_family"
    (tmp_path / "m" / TOKENIZER_FILE).unlink()
    expected = "no tokenizer files \\(expected word_tokenizer.json or tokenizer.json or vocab.txt\\)$"
    with pytest.raises(ModelError, match=expected):
        check_model_dir(tmp_path / "m")


def test_tfidf_norm_sums_each_ids_occurrences_first():
    from tinyplm.models.classic.tfidf import tfidf_norm

    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 6, (5, 40), generator=gen)  # many repeats, id 0 as padding too
    v = torch.rand(5, 40, generator=gen) * (ids != 0)
    x = torch.zeros(5, 6).scatter_add(1, ids, v)  # the TF-IDF vector itself
    torch.testing.assert_close(tfidf_norm(ids, v), x.norm(dim=1))
    long_ids = torch.randint(3, 50_000, (2, 4096), generator=gen)  # what took O(seq^2) memory before
    assert tfidf_norm(long_ids, torch.ones(2, 4096)).shape == (2,)
