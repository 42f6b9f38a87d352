"""SQuAD and CoNLL-2003 readers: layouts, the article split, and errors naming the line or id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
    with pytest.raises(DataError, match=r"question q0: answer 'cat' is not at answer_start 5"):
        read_squad(_squad(tmp_path / "bad.json", answer_start=5))


def test_squad_layout_errors(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"data": [{"title": "t"}]}', encoding="utf-8")
    with pytest.raises(DataError, match=r"data\[0\] has no 'paragraphs'"):
        read_squad(tmp_path / "x.json")
    (tmp_path / "y.json").write_text("not json", encoding="utf-8")
    with pytest.raises(DataError, match="not a JSON file"):
        read_squad(tmp_path / "y.json")


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
    bad = tmp_path / "b.txt"
    bad.write_text(CONLL.replace("rejects VBZ B-VP O", "rejects VBZ O"), encoding="utf-8")
    with pytest.raises(DataError, match=r"b.txt:4: expected 4 space-separated columns"):
        read_conll(bad)
    bad.write_text(CONLL.replace("B-MISC", "B-THING"), encoding="utf-8")
    with pytest.raises(DataError, match=r"b.txt:5: unknown NER tag 'B-THING'"):
        read_conll(bad)
