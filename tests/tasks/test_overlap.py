"""An evaluation split that holds the training examples is said to before any work (tinyplm.tasks.overlap):
a custom task given one file as train and dev measured only what its models were trained on."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import make_tiny_model_dir, tiny_recipe, write_recipe
from helpers_cli import cli
from tinyplm.tasks.base import Example, Split, TaskData
from tinyplm.tasks.overlap import OVERLAP_NOTE_SHARE, eval_overlap_note
from tinyplm.tasks.squad import QAExample


def _data(train: list, evals: dict[str, list]) -> TaskData:
    return TaskData("t", Split("train", train, Path("train.csv")),
                    {name: Split(name, rows, Path(f"{name}.csv")) for name, rows in evals.items()},
                    ("a", "b"), False, ("accuracy",), "accuracy")


def _rows(texts: list[str]) -> list[Example]:
    return [Example(t, None, i % 2, i + 2) for i, t in enumerate(texts)]


@given(st.lists(st.text(alphabet="abc ", min_size=1, max_size=6), min_size=1, max_size=20, unique=True),
       st.integers(0, 20))
@settings(max_examples=60, deadline=None)
def test_a_split_is_named_when_half_or_more_of_it_is_training_examples(texts: list[str], shared: int) -> None:
    shared = min(shared, len(texts))
    dev = _rows(texts[:shared] + [f"unseen {t}" for t in texts[shared:]])
    note = eval_overlap_note(_data(_rows(texts), {"dev": dev}))
    if shared >= OVERLAP_NOTE_SHARE * len(texts):
        assert note is not None and f"{shared} of the {len(texts)} examples of split 'dev' (dev.csv)" in note
        assert "training examples too (train.csv)" in note
    else:
        assert note is None


def test_only_the_examples_the_run_trains_on_count_and_each_kind_of_input_is_compared() -> None:
    rows = _rows(["a", "b", "c", "d"])
    assert eval_overlap_note(_data(rows, {"dev": rows[2:]})) is not None
    assert eval_overlap_note(_data(rows, {"dev": rows[2:]}), max_train_examples=2) is None  # c, d not trained on
    # the same text with another pair is another input
    pairs = [Example("a", "x", 0), Example("b", "y", 1)]
    assert eval_overlap_note(_data(pairs, {"dev": [Example("a", "z", 0), Example("b", "w", 1)]})) is None
    qa = [QAExample("q1", "Who?", "Ann met Bo.", ()), QAExample("q2", "Where?", "In Rome.", ())]
    note = eval_overlap_note(_data(qa, {"dev": qa, "other": [QAExample("q3", "Who?", "Cy met Di.", ())]}))
    assert note is not None and "split 'dev'" in note and "split 'other'" not in note


def test_validate_says_a_custom_dev_file_is_its_train_file(tmp_path: Path) -> None:
    rows = "".join(f"{'good' if i % 2 else 'bad'} film number {i},{'pos' if i % 2 else 'neg'}\n" for i in range(24))
    data = tmp_path / "all.csv"
    data.write_text("text,label\n" + rows, encoding="utf-8")
    model = make_tiny_model_dir(tmp_path / "m")
    task = {"name": "custom", "train_file": str(data), "dev_file": str(data), "max_length": 32}
    recipe = write_recipe(tmp_path / "r.yaml", tiny_recipe(tmp_path, model, tmp_path, task=task))
    done = cli(["validate", recipe], cwd=tmp_path)
    assert done.returncode == 0, done.output
    assert f"note: 24 of the 24 examples of split 'dev' ({data}) are training examples too ({data})" in \
        " ".join(done.stdout.split())
