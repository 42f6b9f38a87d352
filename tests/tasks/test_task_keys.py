"""Keys of a recipe's ``task`` section that the named task does not read are refused before any
data is read, not ignored (``name: sst2`` with ``train_file: mine.csv`` trained on GLUE's SST-2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import make_tiny_glue
from tinyplm.config import TaskSpec
from tinyplm.errors import RecipeError
from tinyplm.tasks import names
from tinyplm.tasks.task_keys import READ_BY, check_task_keys

#: A value other than the default for every key of the table.
SET = {"train_file": "mine.csv", "dev_file": "dev.csv", "text_column": "t", "text_pair_column": "p",
       "label_column": "y", "labels": ["a", "b"], "regression": True, "doc_stride": 16, "max_query_length": 32,
       "train_articles": 5, "context_sentences": 1, "context_after": 1, "eval_max_length": 128}
TASKS = [*names(), "custom", "embedding"]


def test_every_key_of_the_table_has_a_value_to_set() -> None:
    assert set(SET) == set(READ_BY)


@pytest.mark.parametrize("key", sorted(READ_BY))
def test_a_key_is_refused_on_each_task_that_does_not_read_it(key: str) -> None:
    for task in TASKS:
        spec = TaskSpec(name=task, **{key: SET[key]})
        if task in READ_BY[key]:
            check_task_keys(spec, task)  # read there: nothing to say
        else:
            with pytest.raises(RecipeError, match=rf"task\.{key} is for .*task '{task}' does not read it"):
                check_task_keys(spec, task)
    check_task_keys(TaskSpec(name="sst2", **{key: TaskSpec.model_fields[key].default}), "sst2")  # default: fine


def test_a_glue_task_with_a_data_file_is_refused_before_reading(tmp_path: Path) -> None:
    """Before, this trained and evaluated on GLUE's SST-2 and never opened mine.csv."""
    from tinyplm.run import load_task

    glue = make_tiny_glue(tmp_path / "glue", n_train=8, n_dev=4)
    assert len(load_task(TaskSpec(name="SST-2", data_dir=str(glue))).train) == 8
    with pytest.raises(RecipeError, match=r"task\.train_file is for custom and squad and squad_v2; your own data "
                                          r"file is a custom task \(task.name: custom\); task 'sst2'"):
        load_task(TaskSpec(name="SST-2", data_dir=str(glue), train_file=str(tmp_path / "mine.csv")))
    with pytest.raises(RecipeError, match=r"task\.doc_stride is for squad and squad_v2; task 'sst2'"):
        load_task(TaskSpec(name="sst2", data_dir=str(glue), doc_stride=32))


def test_a_finished_runs_stored_recipe_is_read_as_it_ran(tmp_path: Path) -> None:
    """A run recorded before the table (doc_stride beside sst2, then ignored) can still be exported."""
    from tinyplm.run import load_task

    glue = make_tiny_glue(tmp_path / "glue", n_train=8, n_dev=4)
    stored = TaskSpec(name="sst2", data_dir=str(glue), doc_stride=32)
    assert len(load_task(stored, check_keys=False).train) == 8


def test_the_table_says_what_each_reader_reads() -> None:
    """Written out, so a wrong entry of the table fails here (the test above derives from it)."""
    expected = {"train_file": {"custom", "squad", "squad_v2"}, "dev_file": {"custom", "squad", "squad_v2"},
                "text_column": {"custom"}, "text_pair_column": {"custom"}, "label_column": {"custom"},
                "labels": {"custom"}, "regression": {"custom"}, "doc_stride": {"squad", "squad_v2"},
                "max_query_length": {"squad", "squad_v2"}, "train_articles": {"squad"},
                "context_sentences": {"goodreads_spoilers_reviews", "tvtropes_spoilers"},
                "context_after": {"goodreads_spoilers_reviews", "tvtropes_spoilers"}, "eval_max_length": {"embedding"}}
    assert {k: set(v) for k, v in READ_BY.items()} == expected
