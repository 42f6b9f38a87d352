"""Corpus reading: Gutenberg header/footer stripping, wikitext lines, errors naming the path."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinyplm.errors import DataError, TinyplmError
from tinyplm.pretrain.corpus import read_corpus, split_holdout, strip_gutenberg

HEADER = "The Project Gutenberg eBook of Tiny Tales\n\nLicence words here, to be dropped.\n\n"
START = "*** START OF THE PROJECT GUTENBERG EBOOK TINY TALES ***\n"
BODY = (
    "CHAPTER I.\n\n"
    "The cat sat on the mat and\nlooked   at the dog for a while.\n\n"
    "Short.\n\n"
    "The dog, who was asleep, did not look back at the cat at all.\n"
)
END = "*** END OF THE PROJECT GUTENBERG EBOOK TINY TALES ***\n"
FOOTER = "\nUpdated editions will replace the previous one, footer words.\n"


def gutenberg_bytes() -> bytes:
    """A synthetic Gutenberg file: BOM, CRLF line ends, header and footer."""
    text = HEADER + START + BODY + END + FOOTER
    return "\ufeff".encode() + text.replace("\n", "\r\n").encode("utf-8")


def test_strip_gutenberg_keeps_only_the_body_and_handles_bom_and_crlf() -> None:
    body = strip_gutenberg(gutenberg_bytes().decode("utf-8"))
    assert body == BODY
    assert "\r" not in body and "\ufeff" not in body
    assert "Licence" not in body and "footer" not in body and "***" not in body


def test_strip_gutenberg_without_markers_returns_whole_text() -> None:
    assert strip_gutenberg("\ufeffjust text\r\nmore text\r\n") == "just text\nmore text\n"
    assert strip_gutenberg(START + "body only\n") == "body only\n"  # START without END: to the end


def test_read_corpus_books_and_wikitext_from_a_directory(tmp_path: Path) -> None:
    (tmp_path / "books").mkdir()
    (tmp_path / "books" / "tale.txt").write_bytes(gutenberg_bytes())
    wiki = (" \n = Tiny Page = \n \n The first line of the page is here @-@ long . \n \n = = Part = = \n \n "
            "<unk> second line of the page text . \n")
    (tmp_path / "wiki.txt").write_text(wiki, encoding="utf-8")
    (tmp_path / "skip.md").write_text("not a txt file, not read at all\n", encoding="utf-8")
    items = read_corpus([tmp_path])
    assert items == [
        "The cat sat on the mat and looked at the dog for a while.",
        "The dog, who was asleep, did not look back at the cat at all.",
        "The first line of the page is here-long .",
        "[UNK] second line of the page text .",
    ]
    assert read_corpus([tmp_path], max_docs=1) == items[:1]
    assert len(read_corpus([tmp_path], min_chars=5)) == 6  # "CHAPTER I." and "Short." come back


def test_read_corpus_errors_name_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.txt"
    with pytest.raises(DataError, match="nope.txt"):
        read_corpus([missing])
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"a fine first line of text\nsecond line caf\xe9 here\n")
    with pytest.raises(DataError, match=r"latin1\.txt:2: not UTF-8"):
        read_corpus([bad])
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("hi\n\nyo\n", encoding="utf-8")
    with pytest.raises(DataError, match="tiny.txt.*no text items"):
        read_corpus([tiny])
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    with pytest.raises(DataError, match="empty.*no .txt files"):
        read_corpus([empty_dir])


def test_split_holdout_is_deterministic_and_disjoint() -> None:
    items = [f"text {i}" for i in range(100)]
    train, held = split_holdout(items, 0.1, seed=3)
    assert (train, held) == split_holdout(items, 0.1, seed=3)
    assert len(held) == 10 and len(train) == 90
    assert sorted(train + held) == sorted(items)
    assert train == [x for x in items if x in set(train)]  # input order kept
    assert split_holdout(items, 0.1, seed=4)[1] != held
    assert split_holdout(items[:2], 0.01, seed=0)[1]  # at least one held out
    assert split_holdout(items, 0.0, seed=0) == (items, [])
    with pytest.raises(TinyplmError, match="fraction"):
        split_holdout(items, 1.0, seed=0)


def test_a_file_of_one_text_per_line_is_one_item_per_line(tmp_path: Path) -> None:
    """Without a blank line, 2,000 short lines were one paragraph: one 72k-character item, of which
    pre-training read its first max_length pieces (validate said "1 train text")."""
    lines = [f"review number {i} says the plot was fine" for i in range(2000)]
    (tmp_path / "lines.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert read_corpus([tmp_path / "lines.txt"]) == lines
    second = "A second paragraph here, one line."
    (tmp_path / "para.txt").write_text(f"A first paragraph,\nwrapped over lines.\n\n{second}\n")
    assert read_corpus([tmp_path / "para.txt"]) == ["A first paragraph, wrapped over lines.", second]


def test_a_long_text_without_sentence_ends_is_cut_at_spaces() -> None:
    from tinyplm.pretrain.corpus import MAX_CHARS, book_items

    words = " ".join(f"word{i}" for i in range(1000))  # 7,890 characters, no sentence end
    items = book_items(words)
    assert len(items) > 1 and all(len(i) <= MAX_CHARS for i in items)
    assert " ".join(items) == words


def test_blank_lines_at_either_end_do_not_turn_lines_into_one_paragraph(tmp_path: Path) -> None:
    lines = [f"review number {i} says the plot was fine" for i in range(50)]
    (tmp_path / "lines.txt").write_text("\n\n" + "\n".join(lines) + "\n\n\n", encoding="utf-8")
    assert read_corpus([tmp_path / "lines.txt"]) == lines


def test_gzip_and_utf16_files_are_read_and_other_archives_refused_by_name(tmp_path: Path) -> None:
    """A .gz corpus (alone, or in a folder) was "not UTF-8 text (byte 0x8b at offset 1)" or left out of
    its folder unsaid, and a UTF-16 file (Windows' "Unicode") "not UTF-8"; a bzip2 file got no hint."""
    import bz2
    import gzip

    text = "A first paragraph of the tiny corpus, long enough.\n\nA second paragraph that is long enough too.\n"
    plain = tmp_path / "plain.txt"
    plain.write_text(text, encoding="utf-8")
    wanted = read_corpus([plain])
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "packed.txt.gz").write_bytes(gzip.compress(text.encode()))
    assert read_corpus([folder / "packed.txt.gz"]) == read_corpus([folder]) == wanted
    (tmp_path / "rows.jsonl.gz").write_bytes(gzip.compress(b'{"t": "a row of text that is long enough"}\n'))
    assert read_corpus([tmp_path / "rows.jsonl.gz"], text_field="t") == ["a row of text that is long enough"]
    (tmp_path / "unicode.txt").write_bytes(text.replace("\n", "\r\n").encode("utf-16"))
    assert read_corpus([tmp_path / "unicode.txt"]) == wanted
    (tmp_path / "cut.txt.gz").write_bytes(gzip.compress(text.encode())[:20])
    with pytest.raises(DataError, match=r"cut\.txt\.gz: cannot be read"):
        read_corpus([tmp_path / "cut.txt.gz"])
    (tmp_path / "book.txt").write_bytes(bz2.compress(text.encode()))
    with pytest.raises(DataError, match=r"book\.txt: a bzip2 archive, not text; unpack it"):
        read_corpus([tmp_path / "book.txt"])
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 au lait, a drink of some length".encode("latin-1"))
    with pytest.raises(DataError, match=r"latin1\.txt:1: not UTF-8 text .*; save it as UTF-8"):
        read_corpus([tmp_path / "latin1.txt"])


def test_a_tar_archive_and_a_file_with_nul_bytes_are_refused(tmp_path: Path) -> None:
    """A .tar.gz (or .tar) corpus was read as text once gzip files were unpacked: tar headers and NUL
    bytes trained on as the first paragraph; a binary file of valid UTF-8 likewise."""
    import io
    import tarfile

    text = b"A paragraph of the tiny corpus that is long enough to be kept.\n"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("book.txt")
        info.size = len(text)
        tar.addfile(info, io.BytesIO(text))
    (tmp_path / "corpus.tar.gz").write_bytes(buffer.getvalue())
    with pytest.raises(DataError, match=r"corpus\.tar\.gz: a tar archive, not text; unpack it"):
        read_corpus([tmp_path / "corpus.tar.gz"])
    (tmp_path / "blob.txt").write_bytes(text + b"second line\x00\x01 of a binary file of some length\n")
    with pytest.raises(DataError, match=r"blob\.txt:2: holds NUL bytes"):
        read_corpus([tmp_path / "blob.txt"])
