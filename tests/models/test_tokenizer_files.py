"""What a checkpoint's tokenizer needs that is not installed is named."""

from __future__ import annotations

from pathlib import Path


def test_a_sentencepiece_only_tokenizer_without_the_package_names_the_package(tmp_path: Path) -> None:
    import importlib.util

    from tinyplm.models.tokenizer_files import sentencepiece_missing

    (tmp_path / "spiece.model").write_bytes(b"\x00")
    said = sentencepiece_missing(tmp_path)
    if importlib.util.find_spec("sentencepiece") is None:
        assert said is not None and "pip install sentencepiece" in said and "spiece.model" in said
    else:
        assert said is None
    (tmp_path / "tokenizer.json").write_text("{}", encoding="utf-8")
    assert sentencepiece_missing(tmp_path) is None  # transformers reads tokenizer.json without it
