"""Whether a model reads pairs of texts comes from the task it was trained for (its run's recipe or
its config's stamp): a GLUE pair task or a custom task with a pair column, a single-text task, or
unknown (a bare checkpoint, a task whose second text is optional)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import make_tiny_model_dir
from tinyplm.inference.model_info import model_info
from tinyplm.inference.pairs import pair_mismatch, task_pairs


def run_dir(root: Path, task: dict) -> Path:
    """A fake run dir: its recipe's task section and a tiny classifier in model/."""
    root.mkdir(parents=True)
    (root / "config.resolved.yaml").write_text(yaml.safe_dump({"name": "t", "task": task}))
    make_tiny_model_dir(root / "model")
    return root


@pytest.mark.parametrize(("task", "pairs"), [
    ({"name": "mrpc"}, True), ({"name": "STS-B"}, True), ({"name": "mnli"}, True), ({"name": "sst2"}, False),
    ({"name": "cola"}, False), ({"name": "custom", "text_pair_column": "b"}, True), ({"name": "custom"}, False),
    ({"name": "tvtropes_spoilers", "context_sentences": 2}, None), ({"name": "tvtropes_spoilers"}, False),
    ({"name": "goodreads_spoilers"}, False), ({"name": "goodreads_spoilers_reviews", "context_after": 1}, None)])
def test_a_run_says_whether_its_model_reads_pairs(tmp_path: Path, task: dict, pairs: bool | None) -> None:
    info = model_info(run_dir(tmp_path / "run", task))
    assert info.pairs is pairs
    assert info.describe().get("pairs") is pairs


def test_a_bare_checkpoint_takes_both() -> None:
    assert task_pairs(None) is None and task_pairs("custom") is None  # a custom stamp records no pair column
    assert pair_mismatch(None, None, True) is None and pair_mismatch("sst2", None, False) is None
    assert "trained for mrpc on pairs of texts" in pair_mismatch("mrpc", True, False)
    assert "trained for sst2 on one text per example" in pair_mismatch("sst2", False, True)
    assert pair_mismatch("mrpc", True, True) is None and pair_mismatch("sst2", False, False) is None


def test_a_bare_checkpoint_model_info_has_no_pairs(tmp_path: Path) -> None:
    assert model_info(make_tiny_model_dir(tmp_path / "m")).pairs is None


def test_a_context_models_second_text_is_read_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """predict built a context model's pair from texts cleaned one by one, as training does, then
    cleaned the joined pair again, which closes the gap before a sentence that starts with ':'
    (another pair than training's); the text itself is still cleaned."""
    from tinyplm.inference.predictor import Predictor
    from tinyplm.inference.records import TextInput

    root = run_dir(tmp_path / "run", {"name": "tvtropes_spoilers", "context_sentences": 2})
    predictor = Predictor.load(root)
    seen = []
    real = predictor._logits

    def spy(split):
        seen.extend((ex.text, ex.text_pair) for ex in split.examples)
        return real(split)

    monkeypatch.setattr(predictor, "_logits", spy)
    predictor.predict([TextInput("He  dies .", "Ok. :One more.")])
    assert seen == [("He dies.", "Ok. :One more.")]


@pytest.mark.parametrize(("task", "said"), [
    ({"name": "tvtropes_spoilers", "context_sentences": 1}, "reads the texts around each one in the input"),
    ({"name": "tvtropes_spoilers"}, "trained for tvtropes_spoilers on one text per example")])
def test_a_pair_column_for_a_spoiler_model_is_refused_before_reading(tmp_path: Path, task: dict, said: str) -> None:
    """--pair-column on a context model skipped every row (its pair is its context) with exit 0; on
    a spoiler model trained without context the column was read as a second text it never saw."""
    from tinyplm.errors import TinyplmError
    from tinyplm.predict.predict import source_for

    info = model_info(run_dir(tmp_path / "run", task))
    with pytest.raises(TinyplmError, match=f"--pair-column: .*{said}.*leave --pair-column out"):
        source_for(info, str(tmp_path / "in.csv"), text_column="a", pair_column="b")
