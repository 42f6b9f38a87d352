"""Corpus tables: one text per row of a CSV, TSV or JSON-lines file (``corpus.text_field``), read
beside text files, and every problem named by file, line and field."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinyplm.errors import DataError
from tinyplm.pretrain.corpus import read_corpus, read_documents

ROWS = [
    {"id": "1", "sentence": "The second half of this book  drags on far too long.", "stars": "2"},
    {"id": "2", "sentence": "short", "stars": "5"},  # under min_chars: dropped
    {"id": "3", "sentence": "A quiet, moving story with a twist\nI did not see coming.", "stars": "5"},
]


def _write_csv(path: Path, rows: list[dict], delimiter: str = ",") -> Path:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]), delimiter=delimiter)
        writer.writeheader()
        writer.writerows(rows)
    return path


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


WANTED = ["The second half of this book drags on far too long.",
          "A quiet, moving story with a twist I did not see coming."]


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl"])
def test_each_table_kind_gives_its_rows_text_field_whitespace_collapsed(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"reviews{suffix}"
    if suffix == ".jsonl":
        _write_jsonl(path, ROWS)
    else:
        _write_csv(path, ROWS, "\t" if suffix == ".tsv" else ",")
    assert read_corpus([path], text_field="sentence") == WANTED
    assert read_documents([path], text_field="sentence") == [WANTED]  # one table, one document


def test_a_table_beside_text_files_and_max_docs_over_both(tmp_path: Path) -> None:
    folder = tmp_path / "books"
    folder.mkdir()
    (folder / "a.txt").write_text("The first paragraph of a plain book file.\n\nAnd its second paragraph here.\n",
                                  encoding="utf-8")
    table = _write_csv(tmp_path / "reviews.csv", ROWS)
    texts = read_corpus([folder, table], text_field="sentence")
    assert texts == ["The first paragraph of a plain book file.", "And its second paragraph here.", *WANTED]
    assert read_corpus([folder, table], text_field="sentence", max_docs=3) == texts[:3]


def test_a_table_without_text_field_names_the_file_and_its_fields(tmp_path: Path) -> None:
    table = _write_csv(tmp_path / "reviews.csv", ROWS)
    said = (r"reviews\.csv: a table; name the field holding the text \(corpus\.text_field in a recipe, "
            r"--text-field on the command line; its fields: 'id', 'sentence', 'stars'\)")
    with pytest.raises(DataError, match=said):
        read_corpus([table])


def test_a_missing_column_names_the_file_line_and_what_the_row_has(tmp_path: Path) -> None:
    table = _write_csv(tmp_path / "reviews.csv", ROWS)
    said = r"reviews\.csv:2: no field 'text' \(the text field asked for\); this row has 'id'"
    with pytest.raises(DataError, match=said):
        read_corpus([table], text_field="text")
    rows = [{"text": "A line of review text that is long enough."}, {"other": "no text in this row at all"}]
    jsonl = _write_jsonl(tmp_path / "r.jsonl", rows)
    with pytest.raises(DataError, match=r"r\.jsonl:2: no field 'text'"):
        read_corpus([jsonl], text_field="text")


def test_bad_json_lines_and_non_text_fields_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"text": "A line of review text that is long enough."}\n\n{"text": \n', encoding="utf-8")
    with pytest.raises(DataError, match=r"r\.jsonl:3: not a JSON object"):
        read_corpus([path], text_field="text")
    path.write_text('["a list", "not an object"]\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"r\.jsonl:1: a JSON list"):
        read_corpus([path], text_field="text")
    path.write_text('{"text": 3.5}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"r\.jsonl:1: field 'text' holds float, expected text"):
        read_corpus([path], text_field="text")


def test_an_empty_csv_says_it_needs_a_header(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_text("", encoding="utf-8")
    with pytest.raises(DataError, match=r"empty\.csv: empty table"):
        read_corpus([path], text_field="text")


_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=60)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(_TEXT, min_size=1, max_size=12), as_json=st.booleans())
def test_any_texts_come_back_collapsed_in_order_and_none_shorter_than_min_chars(
        tmp_path: Path, texts: list[str], as_json: bool) -> None:
    rows = [{"n": str(i), "text": t} for i, t in enumerate(texts)]
    path = _write_jsonl(tmp_path / "t.jsonl", rows) if as_json else _write_csv(tmp_path / "t.csv", rows)
    wanted = [" ".join(t.split()) for t in texts if len(" ".join(t.split())) >= 5]
    if not wanted:
        with pytest.raises(DataError, match="no text items"):
            read_corpus([path], min_chars=5, text_field="text")
        return
    assert read_corpus([path], min_chars=5, text_field="text") == wanted
