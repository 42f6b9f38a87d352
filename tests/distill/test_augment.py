"""TinyBERT augmentation on a tiny random MLM: determinism, rate, labels, specials, cache."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError
from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

import tinyplm.distill.augment as aug
from tinyplm.config import validate_recipe
from tinyplm.config.schema import AugmentSpec
from tinyplm.distill.augment import EmbeddingNeighbours, augment
from tinyplm.errors import RecipeError
from tinyplm.tasks.base import Example
from tinyplm.train.progress import JsonlLog

SPECIALS = ["[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]"]


@pytest.fixture(scope="module")
def mlm_tok():
    """A tiny random BertForMaskedLM (vocab 99, hidden 32) and its WordPiece tokenizer."""
    from conftest import tiny_vocab

    vocab = tiny_vocab()
    tok = BertTokenizerFast(vocab={t: i for i, t in enumerate(vocab)}, do_lower_case=True)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=37, max_position_embeddings=64)
    return BertForMaskedLM(cfg).eval(), tok


def sentences(n: int, seed: int, length: int = 6) -> list[str]:
    """Synthetic sentences from the tiny vocab's words, with a few multi-piece (letter) words."""
    from conftest import WORDS

    rng = random.Random(seed)
    extra = ["moviez", "plotty", "xyz"]
    return [" ".join(rng.choice(WORDS + extra) for _ in range(length)) for _ in range(n)]


def examples(n: int = 12, seed: int = 0) -> list[Example]:
    texts = sentences(2 * n, seed)
    return [Example(texts[i], texts[n + i] if i % 2 else None, i % 3 if i % 4 else 1.5, i + 2) for i in range(n)]


def run(mlm_tok, exs: list[Example], **kw) -> aug.AugmentResult:
    mlm, tok = mlm_tok
    cache = kw.pop("cache_dir", None)
    spec = AugmentSpec(**{"copies": 4, **kw})
    return augment(exs, mlm, tok, spec, EmbeddingNeighbours.from_model(mlm, tok, k=spec.neighbours),
                   cache_dir=cache, progress=False, precision="fp32")


def test_deterministic_by_seed_and_independent_of_batching(mlm_tok, monkeypatch) -> None:
    exs = examples()
    first = run(mlm_tok, exs, seed=1).examples
    assert run(mlm_tok, exs, seed=1).examples == first
    assert run(mlm_tok, exs, seed=2).examples != first
    monkeypatch.setattr(aug, "CHUNK_EXAMPLES", 5)
    assert run(mlm_tok, exs, seed=1, batch_size=3).examples == first


def test_outputs_keep_labels_lines_and_pairs(mlm_tok) -> None:
    exs = examples()
    out = run(mlm_tok, exs, copies=3).examples
    assert len(out) == len(exs) * (3 + 1)
    assert out[: len(exs)] == exs  # originals first, unchanged
    for i, ex in enumerate(exs):
        for copy in out[len(exs) + 3 * i : len(exs) + 3 * (i + 1)]:
            assert copy.label == ex.label and type(copy.label) is type(ex.label) and copy.line == ex.line
            assert (copy.text_pair is None) == (ex.text_pair is None)
            assert len(copy.text.split()) == len(ex.text.split())
    assert sum(c.text != exs[(j // 3)].text for j, c in enumerate(out[len(exs):])) > 0


def test_replacement_rate_is_p_over_ten_thousand_words(mlm_tok) -> None:
    exs = [Example(t, None, 0) for t in sentences(250, seed=5, length=8)]
    res = run(mlm_tok, exs, copies=10, p=0.4)  # 250 * 8 * 10 = 20,000 word draws
    assert abs(res.replacement_rate - 0.4) <= 0.03 * 0.4
    changed = sum(a != b for i, c in enumerate(res.examples[250:])
                  for a, b in zip(c.text.split(), exs[i // 10].text.split(), strict=True))
    assert changed / 20_000 == pytest.approx(res.replacement_rate, abs=1e-9)  # never "replaced" by itself


def test_special_tokens_are_never_touched_nor_proposed(mlm_tok) -> None:
    _, tok = mlm_tok
    text = "[CLS] the movie [MASK] was [UNK] good [SEP] moviez [PAD] fun"
    out = run(mlm_tok, [Example(text, "[SEP] bad plot", 0)], copies=20, p=1.0).examples[1:]
    words = text.split()
    for ex in out:
        new = ex.text.split()
        for a, b in zip(words, new, strict=True):
            if a in SPECIALS:
                assert b == a
            else:  # p = 1: every other word changed, to a whole-word non-special token
                assert b != a and b not in tok.all_special_tokens and not b.startswith("##")
        assert ex.text_pair.split()[0] == "[SEP]"


def test_pair_keep_leaves_every_second_text_and_draws_the_same_first_texts(mlm_tok) -> None:
    exs = examples()
    both, kept = run(mlm_tok, exs, p=1.0).examples, run(mlm_tok, exs, p=1.0, pair="keep").examples
    n = len(exs)
    assert [c.text for c in kept[n:]] == [c.text for c in both[n:]]  # the text draws come first
    assert [c.text_pair for c in kept[n:]] == [exs[j // 4].text_pair for j in range(4 * n)]
    assert any(c.text_pair != exs[j // 4].text_pair for j, c in enumerate(both[n:]))  # augment does change them


def test_pair_keep_sends_only_the_first_texts_to_the_mlm(mlm_tok) -> None:
    mlm, _ = mlm_tok
    exs = [Example("the movie was good", "bad plot and fun story", 0)]
    rows: list[int] = []
    handle = mlm.bert.register_forward_hook(lambda _m, _a, out: rows.append(out.last_hidden_state.shape[0]))
    try:
        run(mlm_tok, exs, pair="keep")
        kept = sum(rows)
        rows.clear()
        run(mlm_tok, exs, pair="augment")
    finally:
        handle.remove()
    assert kept == 4 and sum(rows) == 4 + 5  # one masked row per single-piece word


def test_resolve_pair_keeps_page_context_only_when_auto() -> None:
    auto = AugmentSpec()
    assert aug.resolve_pair(auto, page_context=True).pair == "keep"
    assert aug.resolve_pair(auto, page_context=False).pair == "augment"
    assert aug.resolve_pair(AugmentSpec(pair="augment"), page_context=True).pair == "augment"
    assert aug.resolve_pair(AugmentSpec(pair="keep"), page_context=False).pair == "keep"
    with pytest.raises(ValidationError, match="pair"):
        AugmentSpec(pair="drop")


def test_pair_keep_has_its_own_cache_entry_and_augment_keeps_the_old_key(mlm_tok, tmp_path: Path) -> None:
    _, tok = mlm_tok
    exs = examples(4)
    key = lambda spec: aug.cache_key(exs, tok, "fp", spec, "nb", False, 32)  # noqa: E731
    assert key(AugmentSpec(pair="augment")) == key(AugmentSpec(pair="auto")) != key(AugmentSpec(pair="keep"))
    run(mlm_tok, exs, cache_dir=tmp_path)
    run(mlm_tok, exs, cache_dir=tmp_path, pair="keep")
    assert len(list((tmp_path / "augment").glob("*.jsonl"))) == 2


def test_second_call_hits_the_cache_without_running_the_mlm(mlm_tok, tmp_path: Path) -> None:
    mlm, _ = mlm_tok
    exs = examples(6)
    calls = []
    handle = mlm.bert.register_forward_hook(lambda *a: calls.append(1))
    try:
        first = run(mlm_tok, exs, cache_dir=tmp_path)
        n_first = len(calls)
        second = run(mlm_tok, exs, cache_dir=tmp_path)
    finally:
        handle.remove()
    assert n_first > 0 and len(calls) == n_first
    assert second.cached and not first.cached
    assert second.examples == first.examples and second.replacement_rate == first.replacement_rate
    assert len(list((tmp_path / "augment").glob("*.jsonl"))) == 1
    run(mlm_tok, exs, cache_dir=tmp_path, seed=7)  # another spec, another entry
    assert len(list((tmp_path / "augment").glob("*.jsonl"))) == 2


class Fixed:
    """A pluggable neighbour source: a dict."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table

    def neighbours(self, word: str) -> list[str]:
        return self.table.get(word, [])

    def fingerprint(self) -> str:
        return json.dumps(self.table, sort_keys=True)


def test_neighbour_source_is_pluggable_and_words_without_candidates_stay(mlm_tok) -> None:
    mlm, tok = mlm_tok
    exs = [Example("moviez xyz plotty", None, 1)]
    res = augment(exs, mlm, tok, AugmentSpec(copies=10, p=1.0), Fixed({"moviez": ["film"]}), progress=False)
    assert {c.text for c in res.examples[1:]} == {"film xyz plotty"}
    assert res.replacement_rate == 1.0  # over words that have candidates only


def test_embedding_neighbours_are_whole_words(mlm_tok) -> None:
    mlm, tok = mlm_tok
    nb = EmbeddingNeighbours.from_model(mlm, tok, k=5)
    found = nb.neighbours("moviez")
    assert len(found) == 5 and all(w.isalpha() and w not in SPECIALS for w in found)
    assert "movie" not in nb.neighbours("movie") and nb.neighbours("moviez") is found  # cached


def test_throughput_is_logged(mlm_tok, tmp_path: Path) -> None:
    mlm, tok = mlm_tok
    log = JsonlLog(tmp_path / "train.jsonl", stage="augment")
    res = augment(examples(4), mlm, tok, AugmentSpec(copies=2), EmbeddingNeighbours.from_model(mlm, tok),
                  log=log, progress=True)
    rec = json.loads((tmp_path / "train.jsonl").read_text().splitlines()[-1])
    assert rec["event"] == "augment" and rec["sentences"] == 8 and rec["sentences_per_s"] > 0
    assert res.sentences_per_s == pytest.approx(8 / res.seconds)


def test_augmented_share_picks_long_texts_up_to_max_examples_in_order() -> None:
    ex = [Example(t, None, 0, i) for i, t in enumerate(["a b c", "a", "a b c d", "a b", "x y z", "p q r s"])]
    chosen, rest = aug.augmented_share(ex, min_words=3)
    assert [e.line for e in chosen] == [0, 2, 4, 5] and [e.line for e in rest] == [1, 3]
    chosen, rest = aug.augmented_share(ex, min_words=3, max_examples=2)
    assert [e.line for e in chosen] == [0, 2] and [e.line for e in rest] == [1, 3, 4, 5]
    chosen, rest = aug.augmented_share(ex)
    assert chosen == ex and rest == []
    assert "min_words" not in AugmentSpec(mlm="m").model_dump()  # older resolved recipes stay as they were
    assert AugmentSpec(mlm="m", min_words=3).model_dump()["min_words"] == 3


def test_bad_spec_is_refused_by_the_one_augment_spec() -> None:
    with pytest.raises(ValidationError, match="less than or equal to 1"):
        AugmentSpec(p=1.5)
    with pytest.raises(RecipeError, match=r"augment\.copies"):
        validate_recipe({"augment": {"mlm": "m", "copies": 0}})


def test_word2vec_neighbours() -> None:
    pytest.importorskip("gensim")
    texts = sentences(200, seed=1, length=8)
    a = aug.word2vec_neighbours(texts, k=4, vector_size=16, epochs=2, min_count=1)
    b = aug.word2vec_neighbours(texts, k=4, vector_size=16, epochs=2, min_count=1)
    assert len(a.neighbours("Movie")) == 4 and "movie" not in a.neighbours("movie")
    assert a.neighbours("movie") == b.neighbours("movie") and a.fingerprint() == b.fingerprint()
    assert a.neighbours("neverseen") == []


def test_word2vec_vectors_are_cached_without_pickle(tmp_path: Path) -> None:
    pytest.importorskip("gensim")
    texts = sentences(200, seed=2, length=8)
    a = aug.word2vec_neighbours(texts, k=4, vector_size=16, epochs=2, min_count=1, cache_dir=tmp_path)
    files = sorted(p.suffix for p in (tmp_path / "word2vec").iterdir())
    assert files == [".json", ".safetensors"]
    b = aug.word2vec_neighbours(texts, k=4, vector_size=16, epochs=2, min_count=1, cache_dir=tmp_path)
    assert b.vectors is not a.vectors  # reloaded from disk ...
    assert b.neighbours("movie") == a.neighbours("movie") and b.fingerprint() == a.fingerprint()  # ... the same
    c = aug.word2vec_neighbours(texts[:100], k=4, vector_size=16, epochs=2, min_count=1, cache_dir=tmp_path)
    assert c.fingerprint() != a.fingerprint() and len(list((tmp_path / "word2vec").iterdir())) == 4


def test_augment_cli_takes_pair_and_names_the_option_when_it_is_bad(tmp_path: Path) -> None:
    from conftest import make_tiny_glue, make_tiny_mlm_dir
    from helpers_cli import cli

    glue, mlm = make_tiny_glue(tmp_path / "glue", n_train=6, n_dev=2), make_tiny_mlm_dir(tmp_path / "mlm")
    args = ["augment", "sst2", "--mlm", mlm, "--data-dir", glue, "--copies", "2"]
    bad = cli([*args, "--out", tmp_path / "bad.jsonl", "--pair", "drop"], cwd=tmp_path)
    assert bad.returncode == 2 and "--pair" in bad.output and not (tmp_path / "bad.jsonl").exists()
    # the options are read before the data or the model: named even where the model dir is wrong too
    early = cli([*args, "--out", tmp_path / "bad.jsonl", "--copies", "0", "--mlm", tmp_path / "none"], cwd=tmp_path)
    assert early.returncode == 2 and "--copies" in early.output and "none" not in early.output
    ok = cli([*args, "--out", tmp_path / "aug.jsonl", "--pair", "keep"], cwd=tmp_path)
    assert ok.returncode == 0, ok.output
    assert len((tmp_path / "aug.jsonl").read_text().splitlines()) == 6 * 3


def test_same_kind_candidates_keep_words_words_and_punctuation_punctuation(mlm_tok) -> None:
    """With candidates: same_kind a word with letters is never replaced by punctuation (a weak masked LM
    proposes it), nor punctuation by a word; with any, this random tiny MLM does propose across kinds."""
    from conftest import WORDS
    from tinyplm.distill.candidates import has_letter

    text = " ".join(WORDS[:8]) + " , movie ! plot ."
    exs = [Example(text, None, 1, 2)]
    original = text.split()

    def kinds_crossed(res: aug.AugmentResult) -> int:
        crossed = 0
        for copy in res.examples[1:]:
            for old, new in zip(original, copy.text.split(), strict=True):
                crossed += old != new and has_letter(old) != has_letter(new)
        return crossed

    spec = {"copies": 40, "p": 1.0, "top_k": 40}
    same = run(mlm_tok, exs, candidates="same_kind", **spec)
    assert kinds_crossed(same) == 0
    assert any(c.text.split()[8] != "," for c in same.examples[1:])  # punctuation still varies, by punctuation
    assert kinds_crossed(run(mlm_tok, exs, **spec)) > 0


def test_same_kind_filters_neighbours_and_has_its_own_cache_entry(mlm_tok, tmp_path: Path) -> None:
    mlm, tok = mlm_tok
    exs = [Example("moviez xyz plotty", None, 1)]
    table = Fixed({"moviez": ["!?", "film", "42"]})
    res = augment(exs, mlm, tok, AugmentSpec(copies=10, p=1.0, candidates="same_kind"), table, progress=False)
    assert {c.text for c in res.examples[1:]} == {"film xyz plotty"}
    key = lambda spec: aug.cache_key(exs, tok, "fp", spec, "nb", False, 32)  # noqa: E731
    assert key(AugmentSpec()) == key(AugmentSpec(candidates="any")) != key(AugmentSpec(candidates="same_kind"))
    with pytest.raises(ValidationError, match="candidates"):
        AugmentSpec(candidates="words")


def test_the_command_refuses_a_selection_that_leaves_nothing_to_augment(tmp_path: Path) -> None:
    """--min-words past every example (or --max-examples 0) wrote an empty file and exited 0."""
    from conftest import make_tiny_glue, make_tiny_mlm_dir
    from helpers_cli import assert_bad_input, cli

    glue, mlm = make_tiny_glue(tmp_path / "glue", n_train=8, n_dev=4), make_tiny_mlm_dir(tmp_path / "mlm")
    base = ["augment", "sst2", "--mlm", str(mlm), "--data-dir", str(glue), "--out", "a.jsonl"]
    assert_bad_input(cli([*base, "--min-words", "1000"], cwd=tmp_path),
                     "--min-words 1000 leaves none of the 8 training examples of sst2 to augment")
    assert_bad_input(cli([*base, "--max-examples", "0"], cwd=tmp_path), "--max-examples 0 leaves none")
    assert not (tmp_path / "a.jsonl").exists()


def test_an_out_under_a_file_is_refused_before_the_work(tmp_path: Path) -> None:
    """--out under a file was a FileExistsError traceback once every copy had been drawn."""
    from conftest import make_tiny_glue, make_tiny_mlm_dir
    from helpers_cli import assert_bad_input, cli

    glue, mlm = make_tiny_glue(tmp_path / "glue", n_train=8, n_dev=4), make_tiny_mlm_dir(tmp_path / "mlm")
    (tmp_path / "afile").write_text("kept", encoding="utf-8")
    bad = cli(["augment", "sst2", "--mlm", mlm, "--data-dir", glue, "--out", tmp_path / "afile" / "a.jsonl"],
              cwd=tmp_path)
    assert_bad_input(bad, "--out")
    assert "is a file" in bad.stderr and (tmp_path / "afile").read_text(encoding="utf-8") == "kept"


def test_sentences_longer_than_the_masked_lms_positions_are_read_in_its_windows(mlm_tok) -> None:
    """The tiny masked LM has 64 positions; augment cut rows at 128 and the LM failed on the first
    long sentence (a traceback after loading). Rows are now cut to the LM's positions."""
    long = [Example(" ".join(sentences(1, seed, length=90)), None, 0, seed + 2) for seed in range(3)]
    result = run(mlm_tok, long, copies=2)
    assert len(result.examples) == 3 * 3 and all(len(e.text.split()) == 90 for e in result.examples)
