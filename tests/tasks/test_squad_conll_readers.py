"""SQuAD and CoNLL-2003 readers: layouts, the article split, and errors naming the line or JSON path
(in-process, and through ``tinyplm evaluate``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers_cli import assert_bad_input, cli
from tinyplm.errors import DataError
from tinyplm.tasks.conll import read_conll
from tinyplm.tasks.squad import read_squad, split_by_article


def _squad(path: Path, answer_start: int = 4, version: str = "v2.0", articles: int = 3) -> Path:
    data = []
    for a in range(articles):
        data.append({"title": f"art{a}", "paragraphs": [{"context": "The cat sat on the mat.", "qas": [
            {"id": f"q{a}", "question": "Who sat?", "answers": [{"text": "cat", "answer_start": answer_start}]},
            {"id": f"n{a}", "question": "Who flew?", "answers": [], "is_impossible": True},
        ]}]})
    path.write_text(json.dumps({"version": version, "data": data}), encoding="utf-8")
    return path


def test_squad_v2_layout_and_article_split(tmp_path: Path) -> None:
    data = read_squad(_squad(tmp_path / "v2.json"))
    assert data.v2 and len(data.examples) == 6
    assert read_squad(_squad(tmp_path / "unversioned.json", version="")).v2  # is_impossible says so
    assert data.examples[0].answers[0].text == "cat" and data.examples[1].is_impossible
    train, held = split_by_article(data, 2)
    assert [t for t, _ in train.articles] == ["art0", "art1"] and [t for t, _ in held.articles] == ["art2"]
    assert not {e.id for e in train.examples} & {e.id for e in held.examples}
    assert held.raw()["data"][0]["paragraphs"][0]["qas"][0]["answers"][0] == {"text": "cat", "answer_start": 4}
    with pytest.raises(DataError, match="cannot keep 3 of 3"):
        split_by_article(data, 3)


def test_squad_answer_offset_mismatch_names_the_question(tmp_path: Path) -> None:
    path = _squad(tmp_path / "bad.json", answer_start=5)
    with pytest.raises(DataError) as info:
        read_squad(path)
    assert str(info.value) == (f"{path}: data[0].paragraphs[0].qas[0].answers[0]: answer 'cat' is not at "
                               "answer_start 5 of its context (found 'at '; question q0)")


def _squad_error(path: Path, content: str | bytes) -> str:
    """The message of reading ``content`` as a SQuAD file (it must fail with a DataError)."""
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(content)
    with pytest.raises(DataError) as info:
        read_squad(path)
    message = str(info.value)
    assert message.startswith(f"{path}:"), message
    return message[len(str(path)) :]


QA = '{"id": "q1", "question": "Who?", "answers": [ANSWER]}'
SQUAD = '{"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "The cat sat.", "qas": [QAS]}]}]}'
CAT = '{"text": "cat", "answer_start": 4}'


@pytest.mark.parametrize(("qas", "expected"), [
    (QA.replace("ANSWER", '{"text": null, "answer_start": 4}'),
     "data[0].paragraphs[0].qas[0].answers[0].text: expected a string, got null"),
    (QA.replace("ANSWER", "3"), "data[0].paragraphs[0].qas[0].answers[0]: expected an object, got a number (3)"),
    (QA.replace("[ANSWER]", "null"), "data[0].paragraphs[0].qas[0].answers: expected a list, got null"),
    (QA.replace("ANSWER", '{"text": "cat", "answer_start": "4"}'),
     "data[0].paragraphs[0].qas[0].answers[0].answer_start: expected an integer, got a string ('4')"),
    (QA.replace("ANSWER", '{"text": "cat", "answer_start": true}'),
     "data[0].paragraphs[0].qas[0].answers[0].answer_start: expected an integer, got true"),
    ('{"id": "q1", "answers": []}', "data[0].paragraphs[0].qas[0]: missing key 'question'"),
    (QA.replace("ANSWER", '{"text": " ", "answer_start": 3}'),
     "data[0].paragraphs[0].qas[0].answers[0].text: empty text"),
    (QA.replace("ANSWER", '{"text": "cat", "answer_start": -4}'),
     "data[0].paragraphs[0].qas[0].answers[0]: answer 'cat' is not at answer_start -4 of its context (found ''"),
    (QA.replace("ANSWER", CAT) + ", " + QA.replace("ANSWER", CAT),
     "data[0].paragraphs[0].qas[1].id: question id 'q1' is used twice (first at data[0].paragraphs[0].qas[0])"),
    (QA.replace("ANSWER", ""),  # v1.1 has no unanswerable question: it scored 0 whatever, and the file read as v2
     "data[0].paragraphs[0].qas[0].answers: empty (question q1), but the file's version is 1.x"),
    (QA.replace("ANSWER", '{"text": "cat", "answer_start": 4}').replace("}]}", '}], "is_impossible": true}'),
     "data[0].paragraphs[0].qas[0]: is_impossible is true but it has 1 answer(s)"),
    ('{"id": "q1", "question": "\\udc00?", "answers": []}',
     "data[0].paragraphs[0].qas[0].question: holds an unpaired surrogate escape"),
])
def test_squad_wrong_types_name_the_json_path(tmp_path: Path, qas: str, expected: str) -> None:
    assert _squad_error(tmp_path / "dev.json", SQUAD.replace("QAS", qas)).startswith(": " + expected)


@pytest.mark.parametrize(("content", "expected"), [
    ('{"data": [{"title": "t"}]}', ": data[0]: missing key 'paragraphs'"),
    ('{"data": [{"paragraphs": "none"}]}', ": data[0].paragraphs: expected a list, got a string ('none')"),
    ('{"version": "1.1", "data": []}', ": holds no questions"),
    ("[1, 2]", ": top level: expected an object, got a list of 2"),
    ('{"data": [{"paragraphs": [{"qas": []}]}]}', ": data[0].paragraphs[0]: missing key 'context'"),
    ("not json", ":1:1: not valid JSON (Expecting value)"),
    ('{"version": "1.1",\n "data": [', ":2:11: not valid JSON (Expecting value)"),
    ("", ":1:1: not valid JSON"),
    (b'{"version": "1.1", "data": [{"title": "caf\xe9"}]}', ":1: not valid UTF-8 (byte 0xe9 at column 43)"),
])
def test_squad_file_errors(tmp_path: Path, content: str | bytes, expected: str) -> None:
    assert _squad_error(tmp_path / "dev.json", content).startswith(expected)


def test_squad_bom_is_accepted(tmp_path: Path) -> None:
    path = _squad(tmp_path / "v2.json")
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert len(read_squad(path).examples) == 6


def test_shipped_squad_dev_split(shared_data: Path) -> None:
    train, held = split_by_article(read_squad(shared_data / "squad" / "dev-v1.1.json"))
    assert (len(train.articles), len(held.articles)) == (38, 10)
    assert not train.v2  # version "1.1", no impossible question
    assert len(train.examples) + len(held.examples) == 10570


CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER
"""


def test_conll_sentences_and_errors(tmp_path: Path) -> None:
    good = tmp_path / "a.txt"
    good.write_text(CONLL, encoding="utf-8")
    sents = read_conll(good)
    assert [s.tokens for s in sents] == [("EU", "rejects", "German"), ("Peter", "Blackburn")]
    assert sents[1].tags == ("B-PER", "I-PER") and sents[1].line == 7
    assert sents[0].pos == ("NNP", "VBZ", "JJ") and sents[0].chunk == ("B-NP", "B-VP", "B-NP")  # probing columns
    bad = tmp_path / "b.txt"
    bad.write_text(CONLL.replace("rejects VBZ B-VP O", "rejects VBZ O"), encoding="utf-8")
    with pytest.raises(DataError, match=r"b.txt:4: expected 4 space-separated columns"):
        read_conll(bad)
    bad.write_text(CONLL.replace("B-MISC", "B-THING"), encoding="utf-8")
    with pytest.raises(DataError, match=r"b.txt:5: unknown NER tag 'B-THING'"):
        read_conll(bad)


@pytest.mark.parametrize(("content", "expected"), [
    (CONLL.encode().replace(b"German", b"G\xe9rman"), ":5: not valid UTF-8 (byte 0xe9 at column 2)"),
    (b"", ": no sentences found"),
    (b"-DOCSTART- -X- -X- O\n\n", ": no sentences found"),
    (CONLL.encode()[:-8], ":8: expected 4 space-separated columns (token POS chunk NER), got 3"),
    (CONLL.encode().replace(b"I-PER", b"I-"), ":8: unknown NER tag 'I-'"),
])
def test_conll_file_errors(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "valid.txt"
    path.write_bytes(content)
    with pytest.raises(DataError) as info:
        read_conll(path)
    assert str(info.value).startswith(f"{path}{expected}")


def test_conll_bom_and_crlf_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "valid.txt"
    path.write_bytes(b"\xef\xbb\xbf" + CONLL.replace("\n", "\r\n").encode())
    sents = read_conll(path)
    assert [s.tokens for s in sents] == [("EU", "rejects", "German"), ("Peter", "Blackburn")]
    assert sents[1].tags == ("B-PER", "I-PER") and sents[1].line == 7


CONLL_OK = b"EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP B-PER\n"
SQUAD_NULL_ANSWER = (b'{"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "The cat sat.", '
                     b'"qas": [{"id": "q1", "question": "Who?", "answers": [{"text": null, "answer_start": 4}]}]}]}]}')


def test_conll_file_with_a_non_utf8_byte(tmp_path: Path, tiny_model_dir: Path) -> None:
    """Found by mutation: this raised a raw UnicodeDecodeError with its traceback."""
    data = tmp_path / "data" / "conll2003"
    data.mkdir(parents=True)
    for name in ("train.txt", "test.txt"):
        (data / name).write_bytes(CONLL_OK)
    (data / "valid.txt").write_bytes(CONLL_OK.replace(b"Peter", b"P\xe9ter"))
    result = cli(["evaluate", tiny_model_dir, "--task", "conll2003", "--data-dir", data.parent], tmp_path)
    assert_bad_input(result, f"error: {data / 'valid.txt'}:4: not valid UTF-8 (byte 0xe9 at column 2)")


def test_squad_answer_that_is_null(tmp_path: Path, tiny_model_dir: Path) -> None:
    """Found by mutation: a null answer text raised AttributeError; now the JSON path is named."""
    data = tmp_path / "data" / "squad"
    data.mkdir(parents=True)
    (data / "dev-v1.1.json").write_bytes(SQUAD_NULL_ANSWER)
    # the tiny model reads 64 positions (evaluate's 128 is cut to them): a short question leaves its windows room
    result = cli(["evaluate", tiny_model_dir, "--task", "squad", "--data-dir", data.parent, "--max-query-length", "16"],
                 tmp_path)
    assert_bad_input(result, f"error: {data / 'dev-v1.1.json'}: data[0].paragraphs[0].qas[0].answers[0].text: "
                             "expected a string, got null")
