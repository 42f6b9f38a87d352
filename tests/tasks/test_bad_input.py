"""Every kind of bad GLUE input raises DataError naming the file and (where relevant) the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinyplm import tasks
from tinyplm.errors import DataError, TinyplmError

SST2_HEADER = "sentence\tlabel\n"
RTE_HEADER = "index\tsentence1\tsentence2\tlabel\n"


def sst2_dir(root: Path, train: bytes, dev: bytes = b"sentence\tlabel\nok .\t1\n") -> Path:
    """A GLUE folder whose SST-2 train and dev files hold the given bytes."""
    (root / "SST-2").mkdir(parents=True)
    (root / "SST-2" / "train.tsv").write_bytes(train)
    (root / "SST-2" / "dev.tsv").write_bytes(dev)
    return root


def read_error(root: Path, task: str = "sst2", split: str = "train") -> str:
    """The DataError message of reading ``split`` of ``task`` under ``root``."""
    with pytest.raises(DataError) as info:
        tasks.get(task, root).read(split)
    return str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    message = read_error(tmp_path)
    path = tmp_path.resolve() / "SST-2" / "train.tsv"
    assert message == f"{path}: file not found (expected the GLUE sst2 train split)"


def test_missing_file_in_load_names_the_split(tmp_path: Path) -> None:
    root = sst2_dir(tmp_path, b"sentence\tlabel\nfine .\t1\n")
    (root / "SST-2" / "dev.tsv").unlink()
    with pytest.raises(DataError, match=r"dev\.tsv: file not found .*sst2 dev split"):
        tasks.get("sst2", root).load()


def test_unknown_split_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TinyplmError, match="no split 'dve'; did you mean 'dev'"):
        tasks.get("sst2", tmp_path).read("dve")


@pytest.mark.parametrize("content", [b"", b"\n\n"], ids=["empty", "blank-lines"])
def test_empty_file(tmp_path: Path, content: bytes) -> None:
    message = read_error(sst2_dir(tmp_path, content))
    assert "train.tsv" in message and "holds no examples" in message


def test_header_only_file(tmp_path: Path) -> None:
    message = read_error(sst2_dir(tmp_path, SST2_HEADER.encode()))
    assert "train.tsv" in message and "holds no examples (only a header line)" in message


def test_empty_headerless_cola_file(tmp_path: Path) -> None:
    (tmp_path / "CoLA").mkdir()
    (tmp_path / "CoLA" / "dev.tsv").write_bytes(b"")
    message = read_error(tmp_path, "cola", "dev")
    assert "dev.tsv" in message and "holds no examples" in message


def test_missing_column(tmp_path: Path) -> None:
    message = read_error(sst2_dir(tmp_path, b"sentence\tlabels\nfine .\t1\n"))
    assert "train.tsv:1: missing column 'label'" in message
    assert "found columns: 'sentence', 'labels'" in message


def test_row_with_wrong_number_of_fields(tmp_path: Path) -> None:
    body = RTE_HEADER + "0\tA.\tB.\tentailment\n1\tA tab\tinside.\tB.\tentailment\n"
    (tmp_path / "RTE").mkdir()
    (tmp_path / "RTE" / "dev.tsv").write_text(body, encoding="utf-8")
    message = read_error(tmp_path, "rte", "dev")
    assert message.endswith("dev.tsv:3: expected 4 tab-separated fields, got 5")


def test_cola_row_with_too_few_fields(tmp_path: Path) -> None:
    (tmp_path / "CoLA").mkdir()
    (tmp_path / "CoLA" / "train.tsv").write_text("gj04\t1\t\tFine.\ngj04\t1\tBad.\n")
    message = read_error(tmp_path, "cola")
    assert "train.tsv:2: expected 4 tab-separated fields, got 3" in message


def test_label_outside_the_set(tmp_path: Path) -> None:
    message = read_error(sst2_dir(tmp_path, b"sentence\tlabel\nfine .\t1\nodd .\t2\n"))
    assert message.endswith("train.tsv:3: label '2' is not one of 0, 1")


def test_nli_label_outside_the_set(tmp_path: Path) -> None:
    (tmp_path / "RTE").mkdir()
    (tmp_path / "RTE" / "dev.tsv").write_text(RTE_HEADER + "0\tA.\tB.\tneutral\n")
    message = read_error(tmp_path, "rte", "dev")
    assert "dev.tsv:2: label 'neutral' is not one of entailment, not_entailment" in message


@pytest.mark.parametrize(
    ("score", "expected"),
    [("high", "score 'high' is not a number"), ("nan", "score 'nan' is not a number"),
     ("5.5", "score 5.5 is outside [0, 5]")],
)
def test_bad_regression_score(tmp_path: Path, score: str, expected: str) -> None:
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"
    header += "\tscore"
    row = f"0\tg\tf\t2012\t0\tnone\tnone\tA.\tB.\t{score}"
    (tmp_path / "STS-B").mkdir()
    (tmp_path / "STS-B" / "dev.tsv").write_text(f"{header}\n{row}\n")
    message = read_error(tmp_path, "stsb", "dev")
    assert "dev.tsv:2: " + expected in message


def test_not_utf8(tmp_path: Path) -> None:
    train = b"sentence\tlabel\nfine .\t1\ncaf\xe9 au lait\t1\n"
    message = read_error(sst2_dir(tmp_path, train))
    assert "train.tsv:3: not valid UTF-8" in message
    assert "0xe9 at column 4" in message


def test_empty_text_field(tmp_path: Path) -> None:
    message = read_error(sst2_dir(tmp_path, b"sentence\tlabel\nfine .\t1\n  \t0\n"))
    assert message.endswith("train.tsv:3: empty text in column 'sentence'")


def test_empty_pair_field(tmp_path: Path) -> None:
    (tmp_path / "RTE").mkdir()
    (tmp_path / "RTE" / "dev.tsv").write_text(RTE_HEADER + "0\tA.\t\tentailment\n")
    message = read_error(tmp_path, "rte", "dev")
    assert message.endswith("dev.tsv:2: empty text in column 'sentence2'")


def test_crlf_line_numbers(tmp_path: Path) -> None:
    train = b"sentence\tlabel\r\nfine .\t1\r\n\r\nbad .\tx\r\n"
    message = read_error(sst2_dir(tmp_path, train))
    assert message.endswith("train.tsv:4: label 'x' is not one of 0, 1")


def test_stray_carriage_return_inside_a_line(tmp_path: Path) -> None:
    message = read_error(sst2_dir(tmp_path, b"sentence\tlabel\nfine\r here .\t1\n"))
    assert "train.tsv:2: cannot split the line" in message


def test_errors_are_value_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        tasks.get("sst2", tmp_path).read("train")
