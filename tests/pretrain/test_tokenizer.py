"""`tinyplm tokenizer train`: each kind trains, saves in HF format, frames pairs, exposes words."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import write_tiny_corpus

from tinyplm.errors import TinyplmError
from tinyplm.pretrain.data import encode_texts
from tinyplm.pretrain.pairs import Pair
from tinyplm.pretrain.tokenizer import train_tokenizer


@pytest.mark.parametrize("kind", ["wordpiece", "bpe", "bytelevel-bpe"])
def test_train_save_load_and_word_boundaries(tmp_path: Path, kind: str) -> None:
    from transformers import AutoTokenizer

    corpus = write_tiny_corpus(tmp_path / "corpus", paragraphs=60)
    out = train_tokenizer([corpus], kind, 300, tmp_path / "tok", min_frequency=1)
    tok = AutoTokenizer.from_pretrained(str(out))
    assert 100 < len(tok) <= 300 and tok.is_fast
    assert tok.mask_token_id is not None and tok.pad_token_id is not None
    enc = tok("the movie was boringly good", "a plot")
    ids = enc["input_ids"]
    assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
    assert enc["token_type_ids"][-1] == 1 and enc["token_type_ids"][0] == 0
    words = [w for w in enc.word_ids() if w is not None]
    assert max(words) == 4  # five words in the first segment (0..4), restarted in the second
    # the text survives a round trip (up to case and spacing)
    text = tok.decode(tok("the movie was good")["input_ids"], skip_special_tokens=True)
    assert text.lower().replace(" ", "") == "themoviewasgood"
    # word starts for masking: one per word, none on specials
    e = encode_texts([Pair("the movie was boringly good", "a plot", 0)], tok, 32)
    starts = e.word_starts[0]
    assert sum(starts) == 7 and starts[0] == 0 and starts[-1] == 0


def test_refuses_to_overwrite_and_bad_kind(tmp_path: Path) -> None:
    corpus = write_tiny_corpus(tmp_path / "corpus")
    train_tokenizer([corpus], "wordpiece", 200, tmp_path / "tok", min_frequency=1)
    with pytest.raises(TinyplmError, match="already holds a tokenizer"):
        train_tokenizer([corpus], "wordpiece", 200, tmp_path / "tok")
    with pytest.raises(TinyplmError, match="kind must be one of"):
        train_tokenizer([corpus], "unigram", 200, tmp_path / "other")  # type: ignore[arg-type]
    # before: a 5-token tokenizer saved (--max-docs 0), a short read (-1), an OverflowError, a 261-token
    # byte-level vocabulary for 150, a FileExistsError after training
    (tmp_path / "file").write_text("x")
    for kwargs, said in (({"max_items": 0}, "--max-docs: expected at least 1"),
                         ({"max_items": -1}, "--max-docs: expected at least 1"),
                         ({"min_frequency": -3}, "--min-frequency: expected 0 or more")):
        with pytest.raises(TinyplmError, match=said):
            train_tokenizer([corpus], "wordpiece", 200, tmp_path / "other", **kwargs)
    with pytest.raises(TinyplmError, match=r"--vocab-size 150: a byte-level BPE .* give at least 2\d\d"):
        train_tokenizer([corpus], "bytelevel-bpe", 150, tmp_path / "other")
    with pytest.raises(TinyplmError, match="--out: .*file: is a file; the tokenizer"):
        train_tokenizer([corpus], "wordpiece", 200, tmp_path / "file")
    with pytest.raises(TinyplmError, match="--out: .*file: is a file, so the tokenizer destination"):
        train_tokenizer([corpus], "wordpiece", 200, tmp_path / "file" / "tok")  # it was found once trained
    assert not (tmp_path / "other").exists()


def test_a_vocabulary_too_large_to_hold_is_refused_not_an_aborted_process(tmp_path: Path) -> None:
    """--vocab-size 10000000000 made tokenizers reserve half a terabyte: the process aborted (exit 134,
    a Rust backtrace); run in a subprocess so that, were it to abort again, only the child dies."""
    from helpers_cli import assert_bad_input, cli

    corpus = write_tiny_corpus(tmp_path / "corpus")
    result = cli(["tokenizer", "train", corpus, "--vocab-size", "10000000000", "--out", tmp_path / "tok"], tmp_path,
                 subprocess=True)
    assert_bad_input(result, "--vocab-size: expected 100 to 1000000")
    assert not (tmp_path / "tok").exists()


def test_a_long_run_without_spaces_reaches_the_trainer_cut_into_words_of_max_word(tmp_path: Path) -> None:
    """A corpus line of megabytes without a space (a hash, base64, DNA) went whole into the trainer, whose
    work grows with the square of a word's length: tokenizer train ran for most of an hour."""
    from tinyplm.pretrain.tokenizer import MAX_WORD, _items

    run = "acgt" * 2_000
    (tmp_path / "dna.txt").write_text(f"a sequence read today {run} and the rest of the line\n", encoding="utf-8")
    item = " ".join(_items([tmp_path / "dna.txt"], None))
    assert max(len(w) for w in item.split()) == MAX_WORD
    assert item.split()[:4] == ["a", "sequence", "read", "today"] and item.replace(" ", "") == \
        f"asequencereadtoday{run}andtherestoftheline"
    train_tokenizer([tmp_path / "dna.txt"], "bpe", 120, tmp_path / "tok", min_frequency=1)
    assert (tmp_path / "tok" / "tokenizer.json").is_file()


def test_cli_trains_a_tokenizer(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tinyplm.cli import app

    corpus = write_tiny_corpus(tmp_path / "corpus")
    result = CliRunner().invoke(app, ["tokenizer", "train", str(corpus), "--kind", "bpe", "--vocab-size", "200",
                                      "--min-frequency", "1", "--out", str(tmp_path / "tok")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "tok" / "tokenizer.json").is_file()
    assert "bpe tokenizer" in result.output and "note:" not in result.output
    more = CliRunner().invoke(app, ["tokenizer", "train", str(corpus), "--kind", "bpe", "--vocab-size", "100000",
                                    "--min-frequency", "1", "--out", str(tmp_path / "big")])
    assert more.exit_code == 0, more.output  # the corpus holds far fewer pieces than asked for: said, not refused
    assert "tokens of the 100000 asked for (--vocab-size)" in " ".join(more.output.split())


def test_cli_trains_on_a_table_column_and_names_the_missing_field(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from tinyplm.cli import app

    table = tmp_path / "reviews.jsonl"
    rows = [{"stars": 5, "review": f"zyxquartz wonderful story number {i} with plenty of words"} for i in range(30)]
    table.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    args = ["tokenizer", "train", str(table), "--vocab-size", "200", "--min-frequency", "1"]
    refused = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "none")])
    said = str(refused.exception)  # the DataError the CLI's main() prints (CliRunner calls the app under it)
    assert refused.exit_code != 0 and "reviews.jsonl: a table; name the field holding the text" in said
    assert "'stars', 'review'" in said and not (tmp_path / "none" / "tokenizer.json").exists()
    result = CliRunner().invoke(app, [*args, "--text-field", "review", "--out", str(tmp_path / "tok")])
    assert result.exit_code == 0, result.output
    vocab = json.loads((tmp_path / "tok" / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    assert "wonderful" in vocab and "stars" not in vocab  # the review column was read, not the keys
