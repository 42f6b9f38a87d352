"""Prediction inputs from every format: rows in file order, bad rows named by line, fatal header errors."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Annotated

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field

from helpers_serve import squad_doc
from tinyplm.errors import DataError, TinyplmError
from tinyplm.inference.records import QAInput, TextInput, TokensInput
from tinyplm.predict.inputs import read_inputs
from tinyplm.predict.sources import Source, detect_format
from tinyplm.predict.table_inputs import columns_read
from tinyplm.tasks.heads import Head
from tinyplm.tasks.readers.rows import decoded_lines


def rows(data: bytes, fmt: str, head: Head = Head.SEQUENCE, **kw) -> list:
    return list(read_inputs(Source("in", fmt, head, **kw), io.BytesIO(data)))


def test_text_lines_bad_bytes_and_blank_lines_are_row_errors() -> None:
    got = rows(b"\xef\xbb\xbfa good film\r\n\nbad \xff film\nfine\n", "text")
    assert [r.line for r in got] == [1, 2, 3, 4]
    assert got[0].item == TextInput("a good film") and got[3].item == TextInput("fine")
    assert got[1].error == "in:2: empty text (a blank line)"
    assert got[2].error.startswith("in:3: not valid UTF-8 (byte 0xff at column 5)")
    tagged = rows(b"the actor  was good\n", "text", Head.TOKEN)
    assert tagged[0].item == TokensInput(("the", "actor", "was", "good"))


def test_tsv_is_read_as_glue_writes_it_and_finds_glue_columns() -> None:
    data = b'sentence\tlabel\nit "was" good\t1\nthree\tfields\there\n\t0\n'
    got = rows(data, "tsv")
    assert got[0].item == TextInput('it "was" good')  # a quote is an ordinary character
    assert "expected 2 tab-separated fields, got 3" in got[1].error and got[1].line == 3
    assert "empty text in column 'sentence'" in got[2].error
    pairs = rows(b"index\tsentence1\tsentence2\tlabel\n0\ta b\tc d\t1\n", "tsv")
    assert pairs[0].item == TextInput("a b", "c d")


def test_csv_quoted_records_keep_their_first_line_and_named_columns() -> None:
    data = b'id,review,other\n1,"two\nlines",x\n2,plain,y\n'
    got = rows(data, "csv", text_column="review")
    assert [(r.line, r.item.text) for r in got] == [(2, "two\nlines"), (4, "plain")]
    with pytest.raises(DataError, match="missing column 'txt'; found columns: 'id', 'review', 'other'"):
        rows(data, "csv", text_column="txt")
    with pytest.raises(DataError, match="no text column found"):
        rows(b"a,b\n1,2\n", "csv")



@settings(max_examples=10, deadline=None)
@given(length=st.integers(131_000, 400_000), quoted=st.booleans(), tsv=st.booleans())
def test_a_field_longer_than_pythons_csv_default_is_read_whole(length: int, quoted: bool, tsv: bool) -> None:
    """A long document in one field (Python's csv module stops at 131,072 characters by default) is
    read as it is, quoted or not, in CSV and TSV, with the rows around it."""
    text = ("word " * (length // 5 + 1))[:length].strip()
    field = f'"{text}"' if quoted and not tsv else text
    sep = "\t" if tsv else ","
    data = f"id{sep}review\n1{sep}short one\n2{sep}{field}\n3{sep}after it\n".encode()
    got = rows(data, "tsv" if tsv else "csv", text_column="review")
    assert [r.error for r in got] == [None] * 3
    assert [r.item.text for r in got] == ["short one", text, "after it"]


def test_jsonl_objects_strings_and_mistakes() -> None:
    data = b'{"text": "a", "text_pair": "b"}\n"just text"\n\n{"text": 3}\nnot json\n[1]\n{"txt": "x"}\n'
    got = rows(data, "jsonl")
    assert got[0].item == TextInput("a", "b") and got[1].item == TextInput("just text")
    errors = {r.line: r.error for r in got if r.error}
    assert "'text' holds a number (3), expected a string" in errors[4]
    assert "not valid JSON" in errors[5] and "expected a JSON object, got list" in errors[6]
    assert "missing key 'text'" in errors[7]


def test_question_answering_rows_from_jsonl_csv_and_official_json() -> None:
    got = rows(b'{"question": "who", "context": "the actor", "id": 7}\n{"question": "who"}\n', "jsonl", Head.SPAN)
    assert got[0].item == QAInput("who", "the actor", "7") and "missing key 'context'" in got[1].error
    table = rows(b"question,context\nwho,the actor\n", "csv", Head.SPAN)
    assert table[0].item == QAInput("who", "the actor")
    doc = squad_doc(3)
    doc["data"][0]["paragraphs"][1]["qas"][0]["question"] = " "
    got = rows(json.dumps(doc).encode(), "squad", Head.SPAN)
    assert [r.item.id for r in got if r.item] == ["q0", "q2"]
    assert got[1].error == "in: data[0].paragraphs[1].qas[0].question: empty text"
    with pytest.raises(DataError, match="data: expected a list"):
        rows(b'{"data": 3}', "squad", Head.SPAN)


def test_conll_sentences_and_tokens_lists() -> None:
    data = b"-DOCSTART- -X- -X- O\n\nthe DT O O\nactor NN O B-PER\n\ngood JJ O O\n"
    got = rows(data, "conll", Head.TOKEN)
    assert [(r.line, r.item.tokens) for r in got] == [(3, ("the", "actor")), (6, ("good",))]
    listed = rows(b'{"tokens": ["a", "b"]}\n{"tokens": ["a b"]}\n{"tokens": []}\n', "jsonl", Head.TOKEN)
    assert listed[0].item == TokensInput(("a", "b")) and "without spaces" in listed[1].error
    assert "non-empty list" in listed[2].error


def test_format_detection(tmp_path: Path) -> None:
    assert detect_format("x.tsv", Head.SEQUENCE) == "tsv" and detect_format("x.json", Head.SPAN) == "squad"
    conll = tmp_path / "valid.txt"
    conll.write_text("-DOCSTART- -X- -X- O\n")
    assert detect_format(str(conll), Head.TOKEN) == "conll" and detect_format(str(conll), Head.SEQUENCE) == "text"
    with pytest.raises(TinyplmError, match="needs a question and a context"):
        detect_format("q.txt", Head.SPAN)
    with pytest.raises(TinyplmError, match="--input-format: expected one of"):
        detect_format("q.txt", Head.SEQUENCE, "xml")


TVTROPES = b'1,"He dies  at the end.",1\n2,A fun show,0\n'


def test_a_headerless_task_file_is_read_in_its_own_layout() -> None:
    got = rows(TVTROPES, "csv", task="tvtropes_spoilers")  # the run's task has no header line
    # its markup gaps closed, as the training reader gives the text
    assert [(r.line, r.item) for r in got] == [(1, TextInput("He dies at the end.")), (2, TextInput("A fun show"))]
    by_number = rows(TVTROPES, "csv", task="tvtropes_spoilers", header=False, text_column="2")
    assert [r.item for r in by_number] == [r.item for r in got]
    named = rows(b"id,sentence,label\n1,A fun show,0\n", "csv", task="tvtropes_spoilers")  # a header after all
    assert [(r.line, r.item) for r in named] == [(2, TextInput("A fun show"))]
    other = rows(b"idx,review,spoiler\n1,A fun show,0\n", "csv", task="tvtropes_spoilers", text_column="review")
    assert [(r.line, r.item) for r in other] == [(2, TextInput("A fun show"))]  # no label there: a header
    cola = rows(b"src\t1\t\tA fine sentence .\nsrc\t0\t*\tSentence fine a .\n", "tsv", task="cola")
    assert [r.item.text for r in cola] == ["A fine sentence .", "Sentence fine a ."]


def test_no_header_numbers_the_columns_from_one() -> None:
    got = rows(b"7,first text,x\n8,second text,y\n", "csv", header=False, text_column="2")
    assert [(r.line, r.item) for r in got] == [(1, TextInput("first text")), (2, TextInput("second text"))]
    pairs = rows(b"a b\tc d\n", "tsv", header=False, text_column="1", pair_column="2")
    assert pairs[0].item == TextInput("a b", "c d")
    assert rows(b"only text\n", "csv", header=False)[0].item == TextInput("only text")
    with pytest.raises(DataError, match="no header line, so name its text column by number \\(1 to 3\\)"):
        rows(b"7,first text,x\n", "csv", header=False)
    with pytest.raises(DataError, match="column 4 asked for, but the rows have 3 columns"):
        rows(b"7,first text,x\n", "csv", header=False, text_column="4")


def test_the_columns_read_are_named_as_the_reader_chose_them() -> None:
    """What ``predict`` says it read: the first known layout of the header (a pair's two columns),
    the columns asked for, and a header-less file's columns by number."""
    def said(data: bytes, fmt: str = "csv", **kw) -> str:
        source = Source("in", fmt, Head.SEQUENCE, **kw)
        return columns_read(source, decoded_lines(io.BytesIO(data)))

    assert said(b"id,sentence,text\n1,a,b\n") == "column 'text'"  # the generic name comes first
    assert said(b"index\tsentence1\tsentence2\tlabel\n0\ta\tb\t1\n", "tsv") == "columns 'sentence1' and 'sentence2'"
    assert said(b"id,review,other\n", text_column="review", pair_column="other") == "columns 'review' and 'other'"
    assert said(b"7,first text,x\n", header=False, text_column="2") == "column number 2"
    assert said(b"src\t1\t\tA fine sentence .\n", "tsv", task="cola") == "column 'sentence' (number 4)"
    with pytest.raises(DataError, match="no text column found"):
        said(b"a,b\n1,2\n")


def test_a_header_with_the_chosen_name_twice_suggests_no_header() -> None:
    # A header-less file read with a header: its first row's fields become column names.
    with pytest.raises(DataError, match="column '1' appears 2 times in the header line; .* pass --no-header"):
        rows(b"1,He dies,1\n2,A fun show,0\n", "csv", text_column="1")
    with pytest.raises(DataError, match="empty; expected a header line"):
        rows(b"\n\n", "csv")


REVIEWS = (b'{"review_id": "r1", "book_id": 7, "review_sentences": [[0, "I loved it."], [1, "He dies."], '
           b'[0, "Read it."]]}\n\n'
           b'{"review_sentences": ["A bare sentence.", [1, "  "], [0, 5]]}\n'
           b'not json\n{"review_id": "r3"}\n')


def test_reviews_give_one_input_per_sentence_with_the_training_context() -> None:

    got = rows(REVIEWS, "reviews", context_sentences=2)
    ok = [(r.line, r.key, r.item) for r in got if r.error is None]
    assert ok == [(1, {"review_id": "r1", "sentence": 0}, TextInput("I loved it.")),
                  (1, {"review_id": "r1", "sentence": 1}, TextInput("He dies.", "I loved it.")),
                  (1, {"review_id": "r1", "sentence": 2}, TextInput("Read it.", "I loved it. He dies.")),
                  (3, {"review_id": None, "sentence": 0}, TextInput("A bare sentence."))]
    errors = [r.error for r in got if r.error]
    assert errors[0] == "in:3: review_sentences[1]: empty sentence"
    assert errors[1].startswith("in:3: review_sentences[2] should be [label, sentence] or a sentence, got '[0, 5]'")
    assert errors[2].startswith("in:4: not valid JSON")
    assert errors[3] == "in:5: missing key 'review_sentences'; found keys: 'review_id'"
    assert rows(REVIEWS[:REVIEWS.index(b"\n")], "reviews")[1].item == TextInput("He dies.")  # no context asked


@pytest.mark.parametrize("after", [0, 2])
def test_reviews_inputs_equal_the_training_readers(tmp_path: Path, after: int) -> None:
    """The same sentence and context pair as tinyplm.tasks.spoilers gives the model in training."""
    from tinyplm.tasks.spoilers import in_dev, read_goodreads_jsonl

    lines = [json.dumps({"review_id": f"r{b}", "book_id": b, "review_sentences": [[i % 2, f"sentence {b} {i}"]
                                                                                  for i in range(4)]})
             for b in range(40)]
    path = tmp_path / "reviews.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    got = rows(path.read_bytes(), "reviews", context_sentences=2, context_after=after)
    train = read_goodreads_jsonl(path, "train", context_sentences=2, context_after=after)
    dev = read_goodreads_jsonl(path, "dev", context_sentences=2, context_after=after)
    expected = sorted([*train, *dev], key=lambda e: (e.line, e.text))
    assert ("|" in (expected[0].text_pair or "")) == bool(after)
    assert [(r.item.text, r.item.text_pair) for r in got] == [(e.text, e.text_pair) for e in expected]
    assert any(in_dev(str(b)) for b in range(40))  # both sides were read


def test_a_context_model_gets_the_rows_before_each_as_in_training(tmp_path: Path) -> None:
    """A TV Tropes model trained with context_sentences: 2 gets, for each row of a text or CSV file,
    the two good rows before it as its pair, as the training reader builds it; bad rows give none."""
    from tinyplm.tasks.spoilers import read_tvtropes_csv

    path = tmp_path / "dev.csv"
    path.write_text("1,A show,0\n2,He dies,1\n3,Then she does,1\n4,The end,0\n", encoding="utf-8")
    got = rows(path.read_bytes(), "csv", task="tvtropes_spoilers", context_sentences=2)
    expected = read_tvtropes_csv(path, "dev", context_sentences=2)
    assert [r.item for r in got] == [TextInput(e.text, e.text_pair) for e in expected]
    text = rows(b"A show\n\nHe dies\nThen she does\n", "text", context_sentences=2)
    assert [r.item for r in text if r.error is None] == [TextInput("A show"), TextInput("He dies", "A show"),
                                                          TextInput("Then she does", "A show He dies")]
    assert "empty text" in text[1].error
    jsonl = rows(b'"A show"\n{"text": "He dies", "text_pair": "own"}\n"The end"\n', "jsonl", context_sentences=1)
    assert jsonl[0].item == TextInput("A show") and jsonl[2].item == TextInput("The end", "A show")
    assert jsonl[1].item is None and "takes the texts around each as its second text" in jsonl[1].error
    assert rows(b"A show\nHe dies\n", "text")[1].item == TextInput("He dies")  # no context asked


def test_a_model_with_context_after_gets_the_rows_after_each_in_file_order(tmp_path: Path) -> None:
    """context_after: the rows after each, as the training reader builds them, every row still
    in file order; bad rows and rows bringing their own pair are errors that take no part in
    anyone's context; a file shorter than the look-ahead is finished all the same."""
    from tinyplm.predict.inputs import with_file_context
    from tinyplm.predict.sources import Row
    from tinyplm.tasks.spoilers import read_tvtropes_csv

    path = tmp_path / "dev.csv"
    path.write_text("\n".join(f"{i},Line {i} of the page,{i % 2}" for i in range(1, 8)) + "\n", encoding="utf-8")
    got = rows(path.read_bytes(), "csv", task="tvtropes_spoilers", context_sentences=2, context_after=3)
    expected = read_tvtropes_csv(path, "dev", context_sentences=2, context_after=3)
    assert [r.item for r in got] == [TextInput(e.text, e.text_pair) for e in expected]
    assert [r.line for r in got] == list(range(1, 8))
    mixed = rows(b'"a"\n""\n{"text": "b", "text_pair": "own"}\n"c"\n"d"\n', "jsonl", context_sentences=1,
                 context_after=1)
    assert [r.line for r in mixed] == [1, 2, 3, 4, 5]
    assert [r.item for r in mixed] == [TextInput("a", "| c"), None, None, TextInput("c", "a | d"),
                                       TextInput("d", "c |")]
    assert "empty text" in mixed[1].error and "its second text" in mixed[2].error
    short = list(with_file_context([Row(1, "in:1", TextInput("only"))], 0, 4))
    assert [r.item for r in short] == [TextInput("only")]
    seen: list[int] = []

    def stream():  # a row is given out once the rows it needs are read, not at the end of the file
        for i in range(1, 6):
            seen.append(i)
            yield Row(i, f"in:{i}", TextInput(f"t{i}"))

    lazy = with_file_context(stream(), 0, 1)
    assert next(lazy).item == TextInput("t1", "| t2") and seen == [1, 2]


def test_rows_that_do_not_fit_a_pair_or_single_text_model_are_row_errors() -> None:
    """A model trained on pairs (MRPC) given a text alone, or one trained on one text (SST-2) given a
    pair, would answer meaningless predictions that look like any other: each such row is an error
    naming the line (a bare checkpoint's task is unknown: it takes both)."""
    data = b'{"text": "a good film"}\n{"text": "bad", "text_pair": "plot"}\n'
    single = rows(data, "jsonl", task="sst2", pairs=False)
    assert single[0].item == TextInput("a good film") and single[1].item is None
    assert single[1].error == "in:2: the model was trained for sst2 on one text per example; leave the second text out"
    paired = rows(data, "jsonl", task="mrpc", pairs=True)
    assert paired[0].error.startswith("in:1: the model was trained for mrpc on pairs of texts")
    assert paired[1].item == TextInput("bad", "plot")
    assert [r.error for r in rows(data, "jsonl")] == [None, None]


def test_table_columns_follow_whether_the_model_reads_pairs() -> None:
    """A single-text model reads a table's text column, not the first pair layout its header holds; a
    pair model given a table of one text column, or --text-column alone, is refused at the header."""
    data = b"text,text_pair\na good film,bad plot\n"
    assert rows(data, "csv", task="sst2", pairs=False)[0].item == TextInput("a good film")
    assert rows(data, "csv", task="mrpc", pairs=True)[0].item == TextInput("a good film", "bad plot")
    with pytest.raises(DataError, match=r"in:1: no pair of text columns found among 'sentence', but the model was "
                                        "trained for mrpc on pairs of texts; name them with --text-column and "
                                        "--pair-column"):
        rows(b"sentence\na good film\n", "csv", task="mrpc", pairs=True)
    with pytest.raises(DataError, match="--text-column 'text' without --pair-column"):
        rows(data, "csv", task="mrpc", pairs=True, text_column="text")


def test_a_text_of_zero_width_characters_alone_is_an_empty_text() -> None:
    """Zero-width spaces and joiners alone were predicted (as [CLS] [SEP]: the model's answer to no
    text at all); a word of them alone too. A joiner inside a word (an emoji sequence) is kept."""
    got = rows("\u200b\u200d \ufeff\nok\u200b\n".encode(), "text")
    assert "in:1: the line holds only invisible characters ('\\u200b\\u200d \\ufeff'" in got[0].error
    assert got[1].item == TextInput("ok\u200b")
    words = rows(json.dumps({"tokens": ["a", "\u2060"]}).encode() + b"\n" + json.dumps(
        {"tokens": ["\U0001f469\u200d\U0001f4bb"]}).encode(), "jsonl", Head.TOKEN)
    assert "'tokens'[1] holds" in words[0].error and words[1].item == TokensInput(("\U0001f469\u200d\U0001f4bb",))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list(" \t\n\u00a0\u3000\u200b\u200c\u200d\u2060\ufeff\u00ad\u202eab\u00e9"
                                             "\U0001f469\U000e0001"))) | st.text())
def test_predict_and_serve_read_the_same_texts_as_empty(text: str) -> None:
    """serve's JSON Schema pattern (validated by pydantic-core's regex) and the readers' check
    (predict, training files) refuse exactly the same texts."""
    from pydantic import TypeAdapter, ValidationError

    from tinyplm.serve.api import TEXT_PATTERN
    from tinyplm.tasks.io import encodable

    adapter = TypeAdapter(Annotated[str, Field(pattern=TEXT_PATTERN)])
    try:
        adapter.validate_python(text)
        served = True
    except ValidationError:
        served = False
    read = rows(json.dumps({"text": text}).encode(), "jsonl")[0].error is None
    assert read == (served and encodable(text))
