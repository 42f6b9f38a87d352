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
from tinyplm.pretrain.corpus import read_corpus, read_corpus_pairs, read_documents

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


def _write_tsv(path: Path, rows: list[dict]) -> Path:
    """A TSV as GLUE writes it: no quoting, one record per line (a cell's line break becomes spaces)."""
    lines = ["\t".join(rows[0]), *("\t".join(" ".join(v.split("\n")) for v in r.values()) for r in rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


WANTED = ["The second half of this book drags on far too long.",
          "A quiet, moving story with a twist I did not see coming."]


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl"])
def test_each_table_kind_gives_its_rows_text_field_whitespace_collapsed(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"reviews{suffix}"
    write = {".jsonl": _write_jsonl, ".tsv": _write_tsv, ".csv": _write_csv}[suffix]
    write(path, ROWS)
    assert read_corpus([path], text_field="sentence") == WANTED
    assert read_documents([path], text_field="sentence") == [WANTED]  # one table, one document


def test_a_quote_in_a_tsv_is_an_ordinary_character_as_in_glues_files(tmp_path: Path) -> None:
    # GLUE's QNLI dev.tsv has such cells: a quoting reader takes the quote to open a field and
    # swallows the tabs and lines after it into one cell, losing rows without a word.
    rows = ['"Quoted words" open this sentence, and it goes on', 'A plain second sentence that follows it',
            'One more "half-quoted sentence, long enough to keep']
    path = tmp_path / "glue.tsv"
    path.write_text("index\tsentence\n" + "".join(f"{i}\t{t}\n" for i, t in enumerate(rows)), encoding="utf-8")
    assert read_corpus([path], text_field="sentence") == rows


def test_pairs_are_two_columns_of_each_row_and_a_row_missing_either_is_left_out(tmp_path: Path) -> None:
    rows = [{"question": "Who wrote it?", "sentence": "The book was written  by a poet.", "label": "entailment"},
            {"question": "", "sentence": "A sentence without its question.", "label": "not_entailment"},
            {"question": "When?", "sentence": "In the spring of that year.", "label": "entailment"}]
    wanted = [("Who wrote it?", "The book was written by a poet."), ("When?", "In the spring of that year.")]
    for path in (_write_tsv(tmp_path / "qnli.tsv", rows), _write_csv(tmp_path / "qnli.csv", rows),
                 _write_jsonl(tmp_path / "qnli.jsonl", rows)):
        assert read_corpus_pairs([path], "question", "sentence") == wanted  # short texts kept: a pair's halves
        assert read_corpus_pairs([path], "question", "sentence", max_docs=1) == wanted[:1]
    with pytest.raises(DataError, match=r"qnli\.tsv:2: no field 'answer' \(the text field asked for\)"):
        read_corpus_pairs([tmp_path / "qnli.tsv"], "question", "answer")
    (tmp_path / "notes.txt").write_text("A paragraph of plain text, long enough to be read.\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"notes\.txt: not a table; pairs of texts \(corpus\.pair_field\)"):
        read_corpus_pairs([tmp_path / "notes.txt"], "question", "sentence")
    with pytest.raises(DataError, match="no row holds text in both 'label' and 'question'"):
        read_corpus_pairs([_write_csv(tmp_path / "empty.csv", [{"label": "", "question": ""}])], "label", "question")


def test_a_tsv_row_of_another_width_than_its_header_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "r.tsv"
    path.write_text("id\tsentence\n1\tA sentence that is long enough to keep.\n2\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"r\.tsv:3: expected 2 tab-separated fields, got 1"):
        read_corpus([path], text_field="sentence")


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
            r"family\.embeddings\.text_field or family\.bilm\.text_field beside a student's own corpus, "
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
    with pytest.raises(DataError, match=r"r\.jsonl:1: a JSON array"):
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


def test_a_json_file_is_a_table_of_json_lines_or_an_array_of_objects(tmp_path: Path) -> None:
    """A .json file (JSON lines so named, or one array) was read as prose: its keys, braces and other
    fields were trained on, and --text-field was silently ignored."""
    lines = _write_jsonl(tmp_path / "lines.json", ROWS)
    array = tmp_path / "array.json"
    array.write_text(json.dumps(ROWS, indent=2), encoding="utf-8")
    for path in (lines, array):
        assert read_corpus([path], text_field="sentence") == WANTED
        with pytest.raises(DataError, match=r"\.json: a table; name the field .*'id', 'sentence', 'stars'"):
            read_corpus([path])
    array.write_text(json.dumps([ROWS[0], "a plain string that is no row"]), encoding="utf-8")
    with pytest.raises(DataError, match=r"array\.json: item 2 of the array is a JSON string; expected an object"):
        read_corpus([array], text_field="sentence")
    squad = tmp_path / "squad.json"
    squad.write_text(json.dumps({"version": "1.1", "data": [{"title": "x"}]}, indent=2), encoding="utf-8")
    with pytest.raises(DataError, match=r"squad\.json: one JSON object, not rows"):
        read_corpus([squad], text_field="sentence")
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(ROWS[0]) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"broken\.json:2: not a JSON object"):
        read_corpus([broken], text_field="sentence")
