"""The readers of an embedding model's evaluation data: scored pairs (STS-B, your own CSV/TSV/JSONL),
SQuAD as retrieval and BEIR folders; each bad input is an error naming the file and line."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinyplm.errors import DataError
from tinyplm.tasks.retrieval import RetrievalSet, ScoredPairs, read_beir, read_pairs, squad_retrieval, stsb_pairs

STSB_HEADER = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"


def q(path: Path) -> str:
    """``path`` as a regular expression that matches it literally."""
    return re.escape(str(path))


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def jsonl(path: Path, rows: list) -> Path:
    return write(path, "".join(json.dumps(row) + "\n" for row in rows))


# --------------------------------------------------------------------------- pairs


def test_stsb_pairs_reads_the_glue_layout_with_quotes_kept(tmp_path: Path) -> None:
    rows = ["0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\tA man \"plays\" a flute.\tA man plays a flute."
            "\t5.000",
            "1\tmain-news\theadlines\t2013\t0002\tnone\tnone\tStocks fall.\tA cat sleeps.\t0.250"]
    pairs = stsb_pairs(write(tmp_path / "dev.tsv", "\n".join([STSB_HEADER, *rows]) + "\n"))
    assert pairs.texts_a == ('A man "plays" a flute.', "Stocks fall.")
    assert pairs.texts_b == ("A man plays a flute.", "A cat sleeps.")
    assert pairs.scores == (5.0, 0.25)


def test_stsb_score_outside_its_bounds_names_the_line(tmp_path: Path) -> None:
    rows = ["0\tg\tf\ty\t1\tn\tn\tA b.\tC d.\t1.0", "1\tg\tf\ty\t2\tn\tn\tE f.\tG h.\t7.5"]
    path = write(tmp_path / "dev.tsv", "\n".join([STSB_HEADER, *rows]) + "\n")
    with pytest.raises(DataError, match=rf"{q(path)}:3: .*outside \[0, 5\]"):
        stsb_pairs(path)


@pytest.mark.parametrize("name, text", [
    ("pairs.csv", 'sentence1,sentence2,score\n"A, b",c,1.5\nd,e,-2\n'),
    ("pairs.tsv", "text1\ttext2\tlabel\nA, b\tc\t1.5\nd\te\t-2\n"),
    ("pairs.jsonl", '{"text1": "A, b", "text2": "c", "label": 1.5}\n\n{"text1": "d", "text2": "e", "label": -2}\n'),
])
def test_read_pairs_in_each_format(tmp_path: Path, name: str, text: str) -> None:
    pairs = read_pairs(write(tmp_path / name, text))
    assert (pairs.texts_a, pairs.texts_b, pairs.scores) == (("A, b", "d"), ("c", "e"), (1.5, -2.0))
    assert pairs.source == tmp_path / name


def test_pairs_without_the_accepted_columns_say_which_were_expected(tmp_path: Path) -> None:
    path = write(tmp_path / "p.csv", "first,second,score\na,b,1\n")
    with pytest.raises(DataError, match=rf"{q(path)}:1: expected columns 'sentence1' and 'sentence2' or 'text1' and "
                                        r"'text2' for the texts, and 'score' or 'label' .*found columns: 'first'"):
        read_pairs(path)
    path = write(tmp_path / "p.jsonl", '{"text1": "a", "text2": "b"}\n')
    with pytest.raises(DataError, match=rf"{q(path)}:1: expected keys .*'score' or 'label'.*found keys: 'text1', "
                                        r"'text2'"):
        read_pairs(path)


def test_a_later_record_without_a_key_names_its_line(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "p.jsonl", [{"text1": "a", "text2": "b", "label": 1}, {"text1": "c", "label": 2}])
    with pytest.raises(DataError, match=rf"{q(path)}:2: missing key 'text2'"):
        read_pairs(path)


def test_pairs_bad_json_line_bad_score_and_empty_text(tmp_path: Path) -> None:
    path = write(tmp_path / "p.jsonl", '{"text1": "a", "text2": "b", "score": 1}\n{"text1": "c",\n')
    with pytest.raises(DataError, match=rf"{q(path)}:2: not valid JSON"):
        read_pairs(path)
    path = write(tmp_path / "p.csv", "sentence1,sentence2,score\na,b,1\nc,d,high\n")
    with pytest.raises(DataError, match=rf"{q(path)}:3: score 'high' is not a number"):
        read_pairs(path)
    path = write(tmp_path / "q.csv", "sentence1,sentence2,score\na,b,1\n ,d,2\n")
    with pytest.raises(DataError, match=rf"{q(path)}:3: empty text in column 'sentence1'"):
        read_pairs(path)


@pytest.mark.parametrize("name, text", [("p.csv", ""), ("p.jsonl", ""), ("p.csv", "sentence1,sentence2,score\n"),
                                        ("p.jsonl", "\n\n")])
def test_empty_pairs_files(tmp_path: Path, name: str, text: str) -> None:
    path = write(tmp_path / name, text)
    with pytest.raises(DataError, match=rf"{q(path)}: holds no examples"):
        read_pairs(path)


def test_pairs_file_of_an_unknown_type_or_missing(tmp_path: Path) -> None:
    path = write(tmp_path / "p.txt", "a b 1\n")
    with pytest.raises(DataError, match=rf"{q(path)}: unknown pairs file type '.txt'; expected .csv, .tsv or .jsonl"):
        read_pairs(path)
    with pytest.raises(DataError, match=rf"{q(tmp_path / 'gone.csv')}: file not found"):
        read_pairs(tmp_path / "gone.csv")


def test_one_pair_is_no_correlation(tmp_path: Path) -> None:
    path = write(tmp_path / "p.csv", "sentence1,sentence2,score\na,b,1\n")
    with pytest.raises(DataError, match=rf"{q(path)}: holds 1 pair\(s\); a correlation needs two or more"):
        read_pairs(path)
    with pytest.raises(DataError, match="expected one of each per pair"):
        ScoredPairs(("a", "b"), ("c",), (1.0, 2.0), path)


def test_pairs_of_one_score_are_no_correlation(tmp_path: Path) -> None:
    """Pairs that all have one score (positives only) would give any model Spearman 0: refused."""
    path = write(tmp_path / "p.csv", "sentence1,sentence2,score\na,b,1\nc,d,1.0\ne,f,1\n")
    with pytest.raises(DataError, match=rf"{q(path)}: all 3 pairs have the score 1; a correlation needs pairs of "
                                        "different scores"):
        read_pairs(path)


TEXTS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20).filter(str.strip)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(TEXTS, TEXTS, st.floats(allow_nan=False, allow_infinity=False, width=32)), min_size=2,
                max_size=8).filter(lambda rows: len({s for *_, s in rows}) > 1))
def test_json_lines_pairs_read_back_as_written(tmp_path: Path, rows: list[tuple[str, str, float]]) -> None:
    path = jsonl(tmp_path / "p.jsonl", [{"sentence1": a, "sentence2": b, "score": s} for a, b, s in rows])
    pairs = read_pairs(path)
    assert list(zip(pairs.texts_a, pairs.texts_b, pairs.scores, strict=True)) == rows
    assert all(math.isfinite(s) for s in pairs.scores)


# --------------------------------------------------------------------------- BEIR


def beir(root: Path, corpus: list | None = None, queries: list | None = None, qrels: str | None = None,
         split: str = "test") -> Path:
    """A BEIR folder; each part defaults to a small valid one."""
    jsonl(root / "corpus.jsonl", corpus if corpus is not None else [
        {"_id": "d1", "title": "Paris", "text": "The capital of France."},
        {"_id": "d2", "title": "", "text": "Berlin is in Germany."},
        {"_id": "d3", "text": "Rome is old."},
        {"_id": 4, "title": None, "text": "Madrid."},
    ])
    jsonl(root / "queries.jsonl", queries if queries is not None else [
        {"_id": "q1", "text": "capital of France?"},
        {"_id": "q2", "text": "where is Berlin?", "metadata": {}},
        {"_id": "q3", "text": "only judged not relevant"},
        {"_id": "q4", "text": "never judged"},
    ])
    write(root / "qrels" / f"{split}.tsv", qrels if qrels is not None else
          "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\t4\t1\nq2\td2\t1\nq2\td1\t0\nq3\td3\t0\n")
    return root


def test_read_beir_joins_titles_keeps_order_and_drops_queries_without_relevant_docs(tmp_path: Path) -> None:
    rset = read_beir(beir(tmp_path / "set"))
    assert rset.corpus == {"d1": "Paris The capital of France.", "d2": "Berlin is in Germany.", "d3": "Rome is old.",
                           "4": "Madrid."}
    assert list(rset.corpus) == ["d1", "d2", "d3", "4"]
    assert rset.queries == {"q1": "capital of France?", "q2": "where is Berlin?"}
    assert rset.qrels == {"q1": {"d1": 2, "4": 1}, "q2": {"d2": 1, "d1": 0}}
    assert rset.dropped == 2 and rset.relevant == 3 and rset.source == tmp_path / "set"


def test_read_beir_other_split(tmp_path: Path) -> None:
    folder = beir(tmp_path / "set", split="dev")
    assert set(read_beir(folder, "dev").queries) == {"q1", "q2"}
    with pytest.raises(DataError, match=r"test\.tsv: qrels of split 'test' not found; splits found: dev"):
        read_beir(folder)
    with pytest.raises(DataError, match=rf"{q(tmp_path / 'none')}: BEIR folder not found"):
        read_beir(tmp_path / "none")


@pytest.mark.parametrize("qrels, line, message", [
    ("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td9\t1\n", 3, "corpus-id 'd9' is not in corpus.jsonl"),
    ("query-id\tcorpus-id\tscore\nq7\td1\t1\n", 2, "query-id 'q7' is not in queries.jsonl"),
    ("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td1\t2\n", 3,
     r"query-id 'q1' and corpus-id 'd1' are judged twice \(first at line 2\)"),
    ("query-id\tcorpus-id\tscore\nq1\td1\t1.5\n", 2, "score '1.5' is not a whole number of 0 or more"),
    ("query-id\tcorpus-id\tscore\nq1\td1\t-1\n", 2, "score '-1' is not a whole number"),
    ("query-id\tcorpus-id\tscore\nq1\td1\n", 2, "expected 3 tab-separated fields, got 2"),
    ("query-id\tcorpus-id\tscore\n\td1\t1\n", 2, "empty query-id"),
    ("query-id\tcorpus-id\nq1\td1\n", 1, "missing column 'score'"),
])
def test_bad_qrels_rows_name_file_and_line(tmp_path: Path, qrels: str, line: int, message: str) -> None:
    folder = beir(tmp_path / "set", qrels=qrels)
    with pytest.raises(DataError, match=rf"{q(folder / 'qrels' / 'test.tsv')}:{line}: {message}"):
        read_beir(folder)


def test_bad_corpus_and_query_lines_name_file_and_line(tmp_path: Path) -> None:
    folder = beir(tmp_path / "a")
    write(folder / "corpus.jsonl", '{"_id": "d1", "text": "x"}\n{"_id": "d2", "text": \n')
    with pytest.raises(DataError, match=rf"{q(folder / 'corpus.jsonl')}:2: not valid JSON"):
        read_beir(folder)
    folder = beir(tmp_path / "b", corpus=[{"_id": "d1", "text": "x"}, {"_id": "d2", "text": "y"}, {"_id": "d1",
                                                                                                  "text": "z"}])
    with pytest.raises(DataError, match=rf"{q(folder / 'corpus.jsonl')}:3: _id 'd1' is given twice \(first at "
                                        r"line 1\)"):
        read_beir(folder)
    folder = beir(tmp_path / "c", corpus=[{"_id": "d1", "title": "", "text": " "}])
    with pytest.raises(DataError, match=rf"{q(folder / 'corpus.jsonl')}:1: empty text in keys 'title' and 'text'"):
        read_beir(folder)
    folder = beir(tmp_path / "d", queries=[{"_id": "q1", "text": "a"}, {"_id": True, "text": "b"}])
    with pytest.raises(DataError, match=rf"{q(folder / 'queries.jsonl')}:2: key '_id' holds true, expected "
                                        "a non-empty"):
        read_beir(folder)
    folder = beir(tmp_path / "e", queries=[{"_id": "q1"}])
    with pytest.raises(DataError, match=rf"{q(folder / 'queries.jsonl')}:1: missing key 'text'; found keys: '_id'"):
        read_beir(folder)
    folder = beir(tmp_path / "f", corpus=[])
    with pytest.raises(DataError, match=rf"{q(folder / 'corpus.jsonl')}: holds no examples"):
        read_beir(folder)


def test_no_relevant_document_at_all(tmp_path: Path) -> None:
    folder = beir(tmp_path / "set", qrels="query-id\tcorpus-id\tscore\nq1\td1\t0\n")
    with pytest.raises(DataError, match=rf"{q(folder)}: no query has a relevant document"):
        read_beir(folder)


def test_a_retrieval_set_checks_its_parts(tmp_path: Path) -> None:
    ok = dict(queries={"q": "a"}, corpus={"d": "b"}, qrels={"q": {"d": 1}}, source=tmp_path)
    assert RetrievalSet(**ok).dropped == 0
    for change, message in [({"qrels": {"q": {"x": 1}}}, "document 'x', which is not in the corpus"),
                            ({"qrels": {"q": {"d": 1}, "z": {"d": 1}}}, "query 'z', which is not a query"),
                            ({"qrels": {"q": {"d": 0}}}, "query 'q' has no relevant document"),
                            ({"qrels": {"q": {"d": 1.5}}}, "relevance 1.5 of query 'q'"),
                            ({"corpus": {}}, "the corpus holds no documents")]:
        with pytest.raises(DataError, match=rf"{q(tmp_path)}: .*{message}"):
            RetrievalSet(**{**ok, **change})


# --------------------------------------------------------------------------- SQuAD as retrieval


def squad(path: Path, data: list) -> Path:
    return write(path, json.dumps({"version": "1.1", "data": data}))


def test_squad_paragraphs_are_documents_and_questions_their_queries(tmp_path: Path) -> None:
    answer = [{"text": "x", "answer_start": 0}]
    path = squad(tmp_path / "dev.json", [
        {"title": "A", "paragraphs": [
            {"context": "x one", "qas": [{"id": "a1", "question": "one?", "answers": answer},
                                         {"id": "a2", "question": "also one?", "answers": answer}]},
            {"context": "x two, never asked about", "qas": []}]},
        {"title": "B", "paragraphs": [
            {"context": "x three", "qas": [{"question": "three, no id?", "answers": []}]}]},
    ])
    rset = squad_retrieval(path)
    assert list(rset.corpus) == ["data[0].paragraphs[0]", "data[0].paragraphs[1]", "data[1].paragraphs[0]"]
    assert rset.corpus["data[0].paragraphs[1]"] == "x two, never asked about"
    assert rset.queries == {"a1": "one?", "a2": "also one?", "data[1].paragraphs[0].qas[0]": "three, no id?"}
    assert rset.qrels == {"a1": {"data[0].paragraphs[0]": 1}, "a2": {"data[0].paragraphs[0]": 1},
                          "data[1].paragraphs[0].qas[0]": {"data[1].paragraphs[0]": 1}}
    assert rset.dropped == 0


def test_squad_bad_values_name_the_json_path(tmp_path: Path) -> None:
    path = squad(tmp_path / "a.json", [{"title": "A", "paragraphs": [{"context": " ", "qas": []}]}])
    with pytest.raises(DataError, match=rf"{q(path)}: empty text in data\[0\].paragraphs\[0\].context"):
        squad_retrieval(path)
    path = squad(tmp_path / "b.json", [{"paragraphs": [{"context": "c", "qas": [{"id": "1", "question": 3}]}]}])
    with pytest.raises(DataError, match=rf"{q(path)}: data\[0\].paragraphs\[0\].qas\[0\].question: expected a string"):
        squad_retrieval(path)
    path = squad(tmp_path / "c.json", [{"paragraphs": [{"context": "c", "qas": []}]}])
    with pytest.raises(DataError, match=rf"{q(path)}: holds no questions"):
        squad_retrieval(path)
    path = write(tmp_path / "d.json", '{"data": [\n}')
    with pytest.raises(DataError, match=rf"{q(path)}:2:1: not valid JSON"):
        squad_retrieval(path)


# --------------------------------------------------------------------------- the shared files


@pytest.mark.integration
def test_real_stsb_dev_and_squad_dev_as_retrieval(shared_data: Path) -> None:
    pairs = stsb_pairs(shared_data / "glue" / "STS-B" / "dev.tsv")
    assert len(pairs.scores) == 1500 and min(pairs.scores) >= 0 and max(pairs.scores) <= 5
    rset = squad_retrieval(shared_data / "squad" / "dev-v1.1.json")
    assert (len(rset.queries), len(rset.corpus), rset.dropped) == (10570, 2067, 0)
    assert all(len(judged) == 1 and list(judged.values()) == [1] for judged in rset.qrels.values())
    assert set(rset.qrels) == set(rset.queries)
