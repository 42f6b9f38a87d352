"""Custom tasks from CSV and JSONL files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyplm.errors import DataError, TinyplmError
from tinyplm.tasks import custom_task


def write_csv(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` as UTF-8 and return the path."""
    path.write_text(text, encoding="utf-8")
    return path


def write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    """Write one JSON object per line."""
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_csv_with_inferred_labels_and_quoting(tmp_path: Path) -> None:
    train = write_csv(
        tmp_path / "train.csv",
        'review,stars\n"Great, really ""great"".",pos\nDull.,neg\nFine.,neutral\n',
    )
    dev = write_csv(tmp_path / "dev.csv", "review,stars\r\nAwful.,neg\r\n")
    task = custom_task("reviews", train, dev, text_column="review", label_column="stars")
    assert task.labels == ("neg", "neutral", "pos")
    assert task.metrics == ("accuracy", "f1_macro") and not task.is_regression
    data = task.load()
    first = data.train.examples[0]
    assert (first.text, first.text_pair, first.label, first.line) == (
        'Great, really "great".', None, 2, 2)
    assert [e.label for e in data.evals["dev"].examples] == [0]
    assert data.num_labels == 3


def test_numeric_labels_sort_as_numbers(tmp_path: Path) -> None:
    rows = "".join(f"t{i},{i}\n" for i in (10, 2, 9))
    train = write_csv(tmp_path / "train.csv", "text,label\n" + rows)
    task = custom_task("n", train, train, "text", "label")
    assert task.labels == ("2", "9", "10")


def test_jsonl_text_pair_and_given_labels(tmp_path: Path) -> None:
    rows = [
        {"premise": "A man sleeps.", "hypothesis": "A man rests.", "y": 1},
        {"premise": "A cat.", "hypothesis": "A dog.", "y": 0, "extra": [1, 2]},
    ]
    train = write_jsonl(tmp_path / "train.jsonl", rows)
    dev = write_jsonl(tmp_path / "dev.jsonl", rows[:1])
    task = custom_task("nli", train, dev, "premise", "y", text_pair_column="hypothesis",
                       labels=["1", "0"], metrics=["accuracy"])
    data = task.load()
    assert data.labels == ("1", "0") and data.metrics == ("accuracy",)
    assert [(e.text_pair, e.label) for e in data.train.examples] == [
        ("A man rests.", 0), ("A dog.", 1)]


def test_jsonl_boolean_labels(tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "t.jsonl", [{"s": "a", "l": True}, {"s": "b", "l": False}])
    task = custom_task("b", train, train, "s", "l")
    assert task.labels == ("false", "true")
    assert [e.label for e in task.read("train").examples] == [1, 0]


def test_regression_csv(tmp_path: Path) -> None:
    train = write_csv(tmp_path / "train.csv", "a,b,score\nx,y,0.5\nx,z,4\n")
    task = custom_task("sim", train, train, "a", "score", text_pair_column="b", regression=True)
    assert task.metrics == ("pearson", "spearman") and task.labels == ()
    data = task.load()
    assert [e.label for e in data.train.examples] == [0.5, 4.0]
    assert data.num_labels == 1 and data.is_regression


def test_regression_jsonl_bad_score(tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "t.jsonl", [{"s": "a", "v": 1.5}, {"s": "b", "v": "lots"}])
    task = custom_task("r", train, train, "s", "v", regression=True)
    with pytest.raises(DataError, match=r"t\.jsonl:2: score 'lots' is not a number"):
        task.read("train")


def test_unknown_label_in_dev(tmp_path: Path) -> None:
    train = write_csv(tmp_path / "train.csv", "text,label\na,x\nb,y\n")
    dev = write_csv(tmp_path / "dev.csv", "text,label\na,x\nb,z\n")
    with pytest.raises(DataError, match=r"dev\.csv:3: label 'z' is not one of x, y"):
        custom_task("t", train, dev, "text", "label").read("dev")


def test_missing_csv_column(tmp_path: Path) -> None:
    train = write_csv(tmp_path / "train.csv", "text,lbl\na,x\n")
    expected = r"train\.csv:1: missing column 'label'; found columns: 'text', 'lbl'"
    with pytest.raises(DataError, match=expected):
        custom_task("t", train, train, "text", "label")


def test_csv_row_with_wrong_number_of_fields(tmp_path: Path) -> None:
    train = write_csv(tmp_path / "train.csv", "text,label\na,x\nb,y,extra\n")
    task = custom_task("t", train, train, "text", "label", labels=["x", "y"])
    with pytest.raises(DataError, match=r"train\.csv:3: expected 2 comma-separated fields, got 3"):
        task.read("train")


def test_csv_empty_text(tmp_path: Path) -> None:
    train = write_csv(tmp_path / "train.csv", "text,label\na,x\n,y\n")
    with pytest.raises(DataError, match=r"train\.csv:3: empty text in column 'text'"):
        custom_task("t", train, train, "text", "label")


def test_jsonl_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"s": "a", "l": "x"}\n\n{"s": "b", "l": \n', encoding="utf-8")
    with pytest.raises(DataError, match=r"t\.jsonl:3: not valid JSON"):
        custom_task("t", path, path, "s", "l", labels=["x", "y"]).read("train")
    path.write_text('{"s": "a", "l": "x"}\n{"s": "b"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"t\.jsonl:2: missing key 'l'; found keys: 's'"):
        custom_task("t", path, path, "s", "l", labels=["x", "y"]).read("train")
    path.write_text('["s", "l"]\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"t\.jsonl:1: expected a JSON object, got list"):
        custom_task("t", path, path, "s", "l", labels=["x", "y"]).read("train")


def test_not_utf8_csv(tmp_path: Path) -> None:
    path = tmp_path / "train.csv"
    path.write_bytes(b"text,label\na,x\n\xff\xfe,y\n")
    with pytest.raises(DataError, match=r"train\.csv:3: not valid UTF-8"):
        custom_task("t", path, path, "text", "label")


def test_empty_and_header_only_files(tmp_path: Path) -> None:
    empty = write_csv(tmp_path / "empty.csv", "")
    header = write_csv(tmp_path / "header.csv", "text,label\n")
    for path in (empty, header):
        with pytest.raises(DataError, match=rf"{path.name}: holds no examples"):
            custom_task("t", path, path, "text", "label")


def test_single_label_train_cannot_infer(tmp_path: Path) -> None:
    train = write_csv(tmp_path / "train.csv", "text,label\na,x\nb,x\n")
    with pytest.raises(DataError, match=r"train\.csv: a classifier needs two or more labels"):
        custom_task("t", train, train, "text", "label")


def test_missing_train_file_when_inferring(tmp_path: Path) -> None:
    missing = tmp_path / "nope.csv"
    with pytest.raises(DataError, match=r"nope\.csv: file not found \(expected the custom t train"):
        custom_task("t", missing, missing, "text", "label")


def test_bad_file_type_and_metrics(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "train.csv", "text,label\na,x\nb,y\n")
    with pytest.raises(TinyplmError, match=r"unknown file type '\.tsv'"):
        custom_task("t", tmp_path / "a.tsv", path, "text", "label")
    expected = "unknown classification metric 'acuracy'; did you mean 'accuracy'"
    with pytest.raises(TinyplmError, match=expected):
        custom_task("t", path, path, "text", "label", metrics=["acuracy"])
    with pytest.raises(TinyplmError, match="unknown regression metric 'accuracy'"):
        custom_task("t", path, path, "text", "label", regression=True, metrics=["accuracy"])


def test_csv_header_names_are_stripped(tmp_path: Path) -> None:
    """A space after the comma of the header (" label") names the same column."""
    train = write_csv(tmp_path / "train.csv", "text, label\nfine,pos\nbad,neg\n")
    data = custom_task("t", train, train, text_column="text", label_column="label").load()
    assert [(e.text, e.label) for e in data.train.examples] == [("fine", 1), ("bad", 0)]


def test_csv_line_numbers_count_only_line_feeds(tmp_path: Path) -> None:
    """A stray carriage return is not a line end: line 4 is the fourth line an editor shows."""
    train = write_csv(tmp_path / "train.csv", "text,label\r\r\nfine,pos\r\r\nbad,neg\nso so,meh\n")
    with pytest.raises(DataError) as info:
        custom_task("t", train, train, "text", "label", labels=["neg", "pos"]).load()
    assert str(info.value) == f"{train.resolve()}:4: label 'meh' is not one of neg, pos"


def test_inferred_labels_name_the_train_file(tmp_path: Path) -> None:
    """A dev label the train file never had: the message says where the label set came from."""
    train = write_csv(tmp_path / "train.csv", "text,label\nfine,pos\nbad,neg\n")
    dev = write_csv(tmp_path / "dev.csv", 'text,label\nok,"ne\ng"\n')
    with pytest.raises(DataError) as info:
        custom_task("t", train, dev, "text", "label").load()
    message = str(info.value)
    # a quoted record spanning lines 2-3 is located at its first line, as every reader locates it
    assert message == (f"{dev.resolve()}:2: label 'ne\\ng' is not one of neg, pos "
                       f"(the labels found in {train.resolve()})")
    assert "\n" not in message


def test_jsonl_lone_surrogate_escape(tmp_path: Path) -> None:
    """"\\ud800" parses as JSON but is no character: no tokenizer can take it."""
    train = tmp_path / "train.jsonl"
    train.write_text('{"text": "ok", "label": "a"}\n{"text": "bad \\ud800", "label": "b"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"train\.jsonl:2: column 'text' holds an unpaired surrogate escape"):
        custom_task("t", train, train, "text", "label", labels=["a", "b"]).load()


def test_an_empty_label_is_refused_at_its_line_not_made_a_class(tmp_path: Path) -> None:
    train = write_csv(tmp_path / "train.csv", "text,label\na,pos\nb,\nc,neg\n")
    with pytest.raises(DataError, match=r"train\.csv:3: the label is empty"):
        custom_task("t", train, train, "text", "label")
    given = write_csv(tmp_path / "dev.csv", "text,label\na,pos\nb, \n")
    with pytest.raises(DataError, match=r"dev\.csv:3: the label is empty"):
        custom_task("t", given, given, "text", "label", labels=["neg", "pos"]).read("dev")


@pytest.mark.parametrize(("rows", "pair"), [
    ("text,label\na,1\nb,1.0\nc,0\n", ("'1'", "'1.0'")),
    ("text,label\na,2\nb,02\nc,0\n", ("'02'", "'2'")),
], ids=["one-point-zero", "leading-zero"])
def test_one_number_written_two_ways_is_refused_not_made_two_classes(tmp_path: Path, rows: str, pair) -> None:
    train = write_csv(tmp_path / "train.csv", rows)
    with pytest.raises(DataError, match=rf"train\.csv: the labels {pair[0]} and {pair[1]} are one number written two"):
        custom_task("t", train, train, "text", "label")


def test_json_numbers_of_one_value_and_nan_labels_are_refused(tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "train.jsonl", [{"text": "a", "label": 1}, {"text": "b", "label": 1.0},
                                                    {"text": "c", "label": 0}])
    with pytest.raises(DataError, match=r"the labels '1' and '1\.0' are one number written two ways"):
        custom_task("t", train, train, "text", "label")
    nan = tmp_path / "nan.jsonl"
    nan.write_text('{"text": "a", "label": 1}\n{"text": "b", "label": NaN}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"nan\.jsonl:2: key 'label' holds nan, expected a label"):
        custom_task("t", nan, nan, "text", "label")


def test_a_column_named_twice_or_the_label_read_as_text_is_refused(tmp_path: Path) -> None:
    twice = write_csv(tmp_path / "twice.csv", "text,text,label\na,b,x\nc,d,y\n")
    with pytest.raises(DataError, match=r"twice\.csv:1: column 'text' appears 2 times in the header line"):
        custom_task("t", twice, twice, "text", "label")
    ok = write_csv(tmp_path / "ok.csv", "text,label\na,x\nb,y\n")
    with pytest.raises(TinyplmError, match="the label column 'label' is also a text column"):
        custom_task("t", ok, ok, "label", "label")
    with pytest.raises(TinyplmError, match="the label column 'label' is also a text column"):
        custom_task("t", ok, ok, "text", "label", text_pair_column="label")


def test_a_tab_separated_file_named_csv_is_said_to_look_so(tmp_path: Path) -> None:
    tabs = write_csv(tmp_path / "tabs.csv", "text\tlabel\na\tx\nb\ty\n")
    with pytest.raises(DataError, match=r"missing column 'text'; found columns: 'text\\tlabel' \(the header holds "
                                        r"tabs: a tab-separated file is read as one when named \.tsv\)"):
        custom_task("t", tabs, tabs, "text", "label")


def test_labels_with_fractions_are_names_and_nan_is_a_missing_label(tmp_path: Path) -> None:
    sections = write_csv(tmp_path / "sections.csv", "text,label\na,1.1\nb,1.10\nc,2.3\n")
    assert custom_task("t", sections, sections, "text", "label").labels == ("1.1", "1.10", "2.3")
    big = write_csv(tmp_path / "big.csv", "text,label\na,9007199254740993\nb,9007199254740992\n")
    assert len(custom_task("t", big, big, "text", "label").labels) == 2
    nan = write_csv(tmp_path / "nan.csv", "text,label\na,0\nb,1\nc,nan\n")
    with pytest.raises(DataError, match=r"nan\.csv: a label is 'nan', a missing value written out"):
        custom_task("t", nan, nan, "text", "label")


def test_a_label_given_twice_is_refused_not_made_an_output_of_its_own(tmp_path: Path) -> None:
    train = write_csv(tmp_path / "t.csv", "text,label\na,x\nb,y\n")
    with pytest.raises(TinyplmError, match=r"task.labels names 'x' more than once"):
        custom_task("t", train, train, "text", "label", labels=["x", "y", "x"])


def test_a_custom_task_without_its_files_says_which_and_where_to_give_them(tmp_path: Path) -> None:
    """``tinyplm finetune --task custom`` without files said only that task.train_file and
    task.dev_file were needed, not that the command takes them after its options."""
    from tinyplm.config import TaskSpec
    from tinyplm.errors import RecipeError
    from tinyplm.tasks import load_task

    train = write_csv(tmp_path / "train.csv", "text,label\na,x\nb,y\n")
    with pytest.raises(RecipeError, match=r"needs task\.dev_file, .* or after a command's options "
                                          r"\(task\.train_file=train\.csv task\.dev_file=dev\.csv\)"):
        load_task(TaskSpec(name="custom", train_file=str(train)))


def test_a_command_of_named_tasks_given_custom_says_where_custom_tasks_are_read() -> None:
    """``tinyplm augment custom`` said "unknown task 'custom' ... (for your own CSV/JSONL files use a
    custom task)", which is what the user had asked for."""
    from tinyplm.tasks import get

    with pytest.raises(TinyplmError, match=r"task 'custom' reads your own CSV/JSONL files, named by a recipe's "
                                           r"task section .*; this command reads a named task: cola, sst2"):
        get("custom")


@given(st.sampled_from(["custom", "embedding"]), st.lists(st.booleans(), min_size=9, max_size=9),
       st.sampled_from(["", " ", "\t"]))
@settings(max_examples=40, deadline=None)
def test_custom_and_embedding_are_read_in_any_case(name: str, upper: list[bool], pad: str) -> None:
    """``task.name: Custom`` was looked up among the named tasks and refused as a command's
    ``custom``; the two names that are not looked up now mean the same in any case or padding."""
    from tinyplm.config import TaskSpec

    spelled = pad + "".join(c.upper() if u else c for c, u in zip(name, upper, strict=False)) + pad
    assert TaskSpec(name=spelled).name == name
    assert TaskSpec(name="SST-2").name == "SST-2"  # a named task keeps its spelling: matched as it is


def test_a_recipe_task_named_Custom_reads_its_files(tmp_path: Path) -> None:  # noqa: N802
    from tinyplm.config import TaskSpec
    from tinyplm.tasks import load_task

    train = write_csv(tmp_path / "train.csv", "text,label\na b,x\nc d,y\n")
    dev = write_csv(tmp_path / "dev.csv", "text,label\ne f,y\n")
    data = load_task(TaskSpec(name="Custom", train_file=str(train), dev_file=str(dev)))
    assert data.labels == ("x", "y") and [e.label for e in data.evals["dev"].examples] == [1]
