"""Bad input through the real command line (issue item 11).

Every case: exit code 2, a short ``error:`` naming the file, line or key and what was expected,
no traceback, and every file that existed before (data, recipe, teacher, an earlier run) is
byte-for-byte unchanged with the same mtime. Reusing a finished run dir needs ``--force``.

Most cases call ``tinyplm.cli.main()`` in-process (see ``tests/helpers_cli.py``); a few
(``subprocess=True``) run ``python -m tinyplm.cli`` for real. ``TINYPLM_TEST_SUBPROCESS=1`` runs
them all as subprocesses (~5 min on a busy 2-core CPU instead of ~30 s).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import make_tiny_glue, make_tiny_model_dir, tiny_recipe, tiny_sentiment_rows, write_recipe
from helpers_cli import Result, added, assert_bad_input, changed, cli, snapshot, write_sst2

HEADER = b"sentence\tlabel\n"
GOOD_TRAIN = HEADER + b"".join(f"{t}\t{y}\n".encode() for t, y in tiny_sentiment_rows(16, seed=0))
GOOD_DEV = HEADER + b"".join(f"{t}\t{y}\n".encode() for t, y in tiny_sentiment_rows(8, seed=1))


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tiny random BERT classifier (2 labels, vocab 99) shared by the whole module."""
    return make_tiny_model_dir(tmp_path_factory.mktemp("teacher") / "tiny-bert")


@pytest.fixture(scope="module")
def glue_ok(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A well-formed GLUE folder with a tiny SST-2 train and dev split."""
    return make_tiny_glue(tmp_path_factory.mktemp("glue-ok") / "glue", n_train=16, n_dev=8)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory, model_dir: Path, glue_ok: Path) -> Path:
    """A run dir holding a finished run (the tiny teacher measured, no training: the cheapest run)."""
    root = tmp_path_factory.mktemp("finished")
    recipe = recipe_file(root, glue_ok, model_dir)
    result = cli(["run", recipe.name], root)
    assert result.returncode == 0, result.output
    run_dir = root / "runs" / "tiny"
    assert (run_dir / "results.json").is_file() and (run_dir / "report.html").is_file()
    return run_dir


def recipe_file(root: Path, glue: Path, model: Path, **sections) -> Path:
    """``root/recipe.yaml``: the tiny recipe with the teacher used as is (no fine-tuning), so a
    finished run costs only loading and measuring; ``sections`` replace top-level keys (a value
    of None drops the key)."""
    recipe = tiny_recipe(root, model, glue, **{"teacher": {"model": str(model)}, **sections})
    return write_recipe(root / "recipe.yaml", {k: v for k, v in recipe.items() if v is not None})


def copy_run(run_dir: Path, dst: Path) -> Path:
    """A copy of ``run_dir`` at ``dst`` (mtimes kept), for tests that may write into it."""
    shutil.copytree(run_dir, dst)
    return dst


def assert_no_run_dir(root: Path) -> None:
    """Bad input is found before anything is written: the recipe's run dir was never created."""
    assert not (root / "runs").exists(), sorted(p.name for p in (root / "runs").rglob("*"))


def run_bad(tmp_path: Path, args: list[str], *watched: Path, subprocess: bool = False) -> Result:
    """Run ``tinyplm ARGS`` in ``tmp_path``; check that ``tmp_path`` and every ``watched`` folder
    keep all their files unchanged; return the result."""
    before = {root: snapshot(root) for root in watched}
    assert all(before.values()), "a watched folder holds no files"
    before[tmp_path] = snapshot(tmp_path)
    result = cli(args, tmp_path, subprocess=subprocess)
    for root, snap in before.items():
        assert changed(snap, root) == [], f"files changed under {root}\n{result.output}"
    return result


# ----------------------------------------------------------------------------- data files

BAD_DATA = {
    # case id: (train bytes or None for absent, dev bytes, expected fragments ({train}/{dev} = path))
    "missing-train": (None, GOOD_DEV, ["{train}: file not found (expected the GLUE sst2 train split)"]),
    "missing-dev": (GOOD_TRAIN, None, ["{dev}: file not found (expected the GLUE sst2 dev split)"]),
    "empty-train": (b"", GOOD_DEV, ["{train}: holds no examples"]),
    "header-only-train": (HEADER, GOOD_DEV, ["{train}: holds no examples (only a header line)"]),
    "missing-column": (b"sentence\tlabelx\ngood fun\t1\n", GOOD_DEV,
                       ["{train}:1: missing column 'label'", "found columns: 'sentence', 'labelx'"]),
    "wrong-field-count": (HEADER + b"good fun\t1\na bad\tplot\t0\n", GOOD_DEV,
                          ["{train}:3: expected 2 tab-separated fields, got 3"]),
    "label-outside-set": (HEADER + b"good fun\t1\nbad plot\t0\nso so\t2\n", GOOD_DEV,
                          ["{train}:4: label '2' is not one of 0, 1"]),
    "dev-label-outside-set": (GOOD_TRAIN, HEADER + b"good fun\tpositive\n",
                              ["{dev}:2: label 'positive' is not one of 0, 1"]),
    "non-utf8-line": (HEADER + b"good fun\t1\nbad \xff\xfe plot\t0\n", GOOD_DEV,
                      ["{train}:3: not valid UTF-8 (byte 0xff at column 5)"]),
}
SUBPROCESS = {"non-utf8-line", "label-outside-set"}


@pytest.mark.parametrize("case", list(BAD_DATA))
def test_bad_data_file(case: str, tmp_path: Path, model_dir: Path) -> None:
    train, dev, expected = BAD_DATA[case]
    glue = write_sst2(tmp_path / "glue", train, dev)
    recipe = recipe_file(tmp_path, glue, model_dir)
    result = run_bad(tmp_path, ["run", recipe.name], model_dir, subprocess=case in SUBPROCESS)
    folder = (glue / "SST-2").resolve()
    paths = {"train": folder / "train.tsv", "dev": folder / "dev.tsv"}
    assert_bad_input(result, *(e.format(**paths) for e in expected))
    assert_no_run_dir(tmp_path)


def test_bad_custom_csv_names_file_and_line(tmp_path: Path, model_dir: Path, glue_ok: Path) -> None:
    (tmp_path / "train.csv").write_text("text,label\ngood fun,pos\nbad plot,neg\n", encoding="utf-8")
    (tmp_path / "dev.csv").write_text("text,label\ngood fun,pos\nso so,meh\n", encoding="utf-8")
    task = {"name": "custom", "train_file": "train.csv", "dev_file": "dev.csv", "labels": ["neg", "pos"],
            "max_length": 32}
    recipe = recipe_file(tmp_path, glue_ok, model_dir, task=task)
    result = run_bad(tmp_path, ["run", recipe.name], model_dir)
    assert_bad_input(result, f"{(tmp_path / 'dev.csv').resolve()}:3: label 'meh' is not one of neg, pos")
    assert_no_run_dir(tmp_path)


def test_custom_jsonl_missing_key(tmp_path: Path, model_dir: Path, glue_ok: Path) -> None:
    (tmp_path / "train.jsonl").write_text('{"text": "good", "label": "pos"}\n{"txt": "bad", "label": "neg"}\n')
    (tmp_path / "dev.jsonl").write_text('{"text": "good", "label": "pos"}\n')
    task = {"name": "custom", "train_file": "train.jsonl", "dev_file": "dev.jsonl", "labels": ["neg", "pos"]}
    recipe = recipe_file(tmp_path, glue_ok, model_dir, task=task)
    result = run_bad(tmp_path, ["run", recipe.name], model_dir)
    assert_bad_input(result, "train.jsonl:2: missing key 'text'; found keys: 'txt', 'label'")
    assert_no_run_dir(tmp_path)


def test_rerun_after_fixing_bad_data_needs_no_flag(tmp_path: Path, model_dir: Path) -> None:
    """The failed run claimed no run dir, so the corrected rerun is not 'an unfinished run'."""
    glue = write_sst2(tmp_path / "glue", HEADER + b"good fun\t7\n", GOOD_DEV)
    recipe = recipe_file(tmp_path, glue, model_dir)
    assert_bad_input(cli(["run", recipe.name], tmp_path), "train.tsv:2: label '7'")
    assert_no_run_dir(tmp_path)
    write_sst2(glue, GOOD_TRAIN, GOOD_DEV)
    fixed = cli(["run", recipe.name], tmp_path)
    assert fixed.returncode == 0, fixed.output


# ----------------------------------------------------------------------------- teacher / tokenizer


def broken_teacher(model_dir: Path, dst: Path, case: str) -> Path:
    """A copy of the tiny teacher with one thing wrong."""
    teacher = Path(shutil.copytree(model_dir, dst))
    if case == "no-config":
        (teacher / "config.json").unlink()
    elif case == "no-weights":
        (teacher / "model.safetensors").unlink()
    elif case == "vocab-too-big":
        # rebuilt from vocab.txt once tokenizer.json is gone: 129 tokens for a 99-row embedding
        (teacher / "tokenizer.json").unlink()
        words = (teacher / "vocab.txt").read_text(encoding="utf-8").split()
        (teacher / "vocab.txt").write_text("\n".join(words + [f"extra{i}" for i in range(30)]) + "\n")
    elif case == "config-not-json":
        (teacher / "config.json").write_text("{not json", encoding="utf-8")
    return teacher


BAD_TEACHER = {
    "no-config": "{teacher}: no config.json (expected a Hugging Face checkpoint directory)",
    "no-weights": "{teacher}: no weights (expected one of model.safetensors",
    "vocab-too-big": "{teacher}: tokenizer has 129 tokens but the model's vocab_size is 99",
    "config-not-json": "{teacher}/config.json:1:2: not valid JSON (Expecting property name",
}


@pytest.mark.parametrize("case", list(BAD_TEACHER))
def test_bad_teacher_dir(case: str, tmp_path: Path, model_dir: Path, glue_ok: Path) -> None:
    teacher = broken_teacher(model_dir, tmp_path / "teacher", case)
    recipe = recipe_file(tmp_path, glue_ok, teacher)
    result = run_bad(tmp_path, ["run", recipe.name], glue_ok)
    assert_bad_input(result, BAD_TEACHER[case].format(teacher=teacher))
    assert_no_run_dir(tmp_path)


def test_missing_teacher_dir(tmp_path: Path, glue_ok: Path) -> None:
    recipe = recipe_file(tmp_path, glue_ok, tmp_path / "no-such-model")
    result = run_bad(tmp_path, ["run", recipe.name], glue_ok)
    assert_bad_input(result, f"{tmp_path / 'no-such-model'}: model directory not found", "minilm-l6")
    assert_no_run_dir(tmp_path)


# ----------------------------------------------------------------------------- task name


def test_unknown_task_suggests_nearest(tmp_path: Path, model_dir: Path, glue_ok: Path) -> None:
    task = {"name": "sst3", "data_dir": str(glue_ok), "max_length": 32}
    recipe = recipe_file(tmp_path, glue_ok, model_dir, task=task)
    result = run_bad(tmp_path, ["run", recipe.name], model_dir, glue_ok)
    assert_bad_input(result, "unknown task 'sst3'; did you mean 'sst2'?", "Known tasks: cola, sst2")
    assert_no_run_dir(tmp_path)


def test_validate_rejects_unknown_task(tmp_path: Path, model_dir: Path, glue_ok: Path) -> None:
    """`validate` checks the task name too, not only the recipe keys."""
    task = {"name": "sst3", "data_dir": str(glue_ok), "max_length": 32}
    recipe = recipe_file(tmp_path, glue_ok, model_dir, task=task)
    result = run_bad(tmp_path, ["validate", recipe.name])
    assert_bad_input(result, "sst3", "did you mean 'sst2'?")


def test_validate_reads_the_data(tmp_path: Path, model_dir: Path) -> None:
    glue = write_sst2(tmp_path / "glue", GOOD_TRAIN, HEADER + b"fine\t1\nmeh\tmaybe\n")
    recipe = recipe_file(tmp_path, glue, model_dir)
    result = run_bad(tmp_path, ["validate", recipe.name], model_dir)
    assert_bad_input(result, f"{(glue / 'SST-2' / 'dev.tsv').resolve()}:3: label 'maybe' is not one of 0, 1")
    assert_no_run_dir(tmp_path)


# ----------------------------------------------------------------------------- recipe keys


def line_of(path: Path, startswith: str) -> int:
    """1-based number of the first line of ``path`` that starts with ``startswith``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.startswith(startswith))


RECIPE_TYPOS = {
    # case id: (extra recipe sections, line prefix of the bad key, expected message after "recipe.yaml:LINE: ")
    "top-level": ({"studnets": []}, "studnets:",
                  "unknown key 'studnets'; did you mean 'students'? "
                  "Valid keys here: augment, cache_dir, corpus, final, measure"),
    "nested": ({"task": {"name": "sst2", "max_lenght": 64}}, "  max_lenght:",
               "unknown key 'task.max_lenght'; did you mean 'max_length'?"),
    "in-list": ({"students": [{"teacher_layers": [0], "objective": {"temprature": 2}}]}, "    temprature:",
                "unknown key 'students[0].objective.temprature'; did you mean 'temperature'?"),
    "bad-value": ({"task": {"name": "sst2", "max_length": 4}}, "  max_length:",
                  "task.max_length: Input should be greater than or equal to 8"),
    "wrong-type": ({"teacher": {"model": "x", "finetune": {"max_steps": "two"}}}, "    max_steps:",
                   "teacher.finetune.max_steps: Input should be a valid integer"),
}


@pytest.mark.parametrize("case", list(RECIPE_TYPOS))
def test_recipe_typo_names_key_line_and_nearest(case: str, tmp_path: Path, model_dir: Path, glue_ok: Path) -> None:
    sections, prefix, expected = RECIPE_TYPOS[case]
    recipe = recipe_file(tmp_path, glue_ok, model_dir, **sections)
    before = snapshot(tmp_path)
    result = run_bad(tmp_path, ["run", recipe.name], model_dir, subprocess=case == "top-level")
    assert_bad_input(result, f"recipe.yaml:{line_of(recipe, prefix)}: {expected}")
    assert added(before, tmp_path) == [], "a recipe error must not create the run dir"


BAD_OVERRIDES = {
    # case id: (override, expected message after "error: override '<override>': ")
    "unknown-key": ("task.max_lenght=64", "unknown key 'task.max_lenght'; did you mean 'max_length'?"),
    "no-equals": ("teacher.finetune", "expected key=value, e.g. teacher.finetune.lr=3e-5"),
    "bad-index": ("students.3.name=x", "'3' is not an index of a list of 1"),
    "bad-value": ("task.max_length=abc", "task.max_length: Input should be a valid integer"),
    "out-of-range": ("task.max_length=4", "task.max_length: Input should be greater than or equal to 8"),
    "nested-typo": ("students.*.train.lrr=1e-4", "unknown key 'students[0].train.lrr'; did you mean 'lr'?"),
    "typo-above-the-key": ("teacher.finetun.lr=1e-4", "unknown key 'teacher.finetun'; did you mean 'finetune'?"),
}


@pytest.mark.parametrize("case", list(BAD_OVERRIDES))
def test_bad_override(case: str, tmp_path: Path, model_dir: Path, glue_ok: Path) -> None:
    item, expected = BAD_OVERRIDES[case]
    recipe = recipe_file(tmp_path, glue_ok, model_dir, students=[{"teacher_layers": [0]}])
    before = snapshot(tmp_path)
    result = run_bad(tmp_path, ["run", recipe.name, item], model_dir)
    assert_bad_input(result, f"error: override '{item}': {expected}")
    assert "recipe.yaml:" not in result.stderr, "the recipe file holds no error: do not point at a line of it"
    assert added(before, tmp_path) == []


def test_override_into_missing_list_names_the_override(tmp_path: Path, model_dir: Path, glue_ok: Path) -> None:
    recipe = recipe_file(tmp_path, glue_ok, model_dir, students=None)
    assert "students" not in recipe.read_text()
    result = run_bad(tmp_path, ["run", recipe.name, "students.3.name=x"], model_dir)
    assert_bad_input(result, "students")
    assert "override 'students.3.name=x'" in result.stderr


def test_recipe_file_problems(tmp_path: Path) -> None:
    (tmp_path / "latin1.yaml").write_bytes(b"name: caf\xe9\n")
    (tmp_path / "broken.yaml").write_text("name: tiny\ntask: {name: sst2\nteacher: x\n", encoding="utf-8")
    (tmp_path / "list.yaml").write_text("- name: tiny\n", encoding="utf-8")
    before = snapshot(tmp_path)
    assert_bad_input(cli(["run", "missing.yaml"], tmp_path), "missing.yaml: recipe file not found")
    assert_bad_input(cli(["run", "latin1.yaml"], tmp_path), "latin1.yaml:1: not valid UTF-8 (byte 0xe9 at column 10)")
    assert_bad_input(cli(["run", "broken.yaml"], tmp_path), "broken.yaml:3: not valid YAML")
    assert_bad_input(cli(["validate", "list.yaml"], tmp_path), "list.yaml: a recipe is a mapping of keys to values")
    assert changed(before, tmp_path) == [] and added(before, tmp_path) == []


# ----------------------------------------------------------------------------- run directories


def test_finished_run_dir_is_refused_without_force(tmp_path: Path, finished_run: Path) -> None:
    recipe = finished_run.parents[1] / "recipe.yaml"
    before = snapshot(finished_run)
    expected = {"results.json", "report.html", "summary.md", "config.resolved.yaml", "model/model.safetensors"}
    assert expected <= set(before)
    result = run_bad(tmp_path, ["run", recipe], finished_run, recipe.parent, subprocess=True)
    assert_bad_input(result, f"{finished_run}: already holds a finished run (results.json); pass --force")
    assert added(before, finished_run) == []


def test_finished_run_dir_is_refused_with_resume(tmp_path: Path, finished_run: Path) -> None:
    recipe = finished_run.parents[1] / "recipe.yaml"
    before = snapshot(finished_run)
    result = run_bad(tmp_path, ["run", recipe, "--resume"], finished_run)
    assert_bad_input(result, "holds a finished run (results.json): nothing to resume", "--force replaces the run")
    assert added(before, finished_run) == []


def test_force_replaces_a_finished_run(tmp_path: Path, finished_run: Path) -> None:
    run_dir = copy_run(finished_run, tmp_path / "copy")
    before = snapshot(run_dir)
    result = cli(["run", finished_run.parents[1] / "recipe.yaml", "-o", run_dir, "--force"], tmp_path)
    assert result.returncode == 0, result.output
    assert "Traceback" not in result.output
    assert "results.json" in changed(before, run_dir), "--force must write a new results.json"
    assert (run_dir / "report.html").is_file() and (run_dir / "model" / "config.json").is_file()


def test_force_with_bad_data_keeps_the_finished_run(tmp_path: Path, finished_run: Path) -> None:
    run_dir = copy_run(finished_run, tmp_path / "copy")
    glue = write_sst2(tmp_path / "glue", HEADER, GOOD_DEV)
    before = snapshot(run_dir)
    result = cli(["run", finished_run.parents[1] / "recipe.yaml", f"task.data_dir={glue}", "-o", run_dir, "--force"],
                 tmp_path)
    assert_bad_input(result, "train.tsv: holds no examples")
    assert changed(before, run_dir) == [] and added(before, run_dir) == []


def unfinished_run(finished_run: Path, dst: Path) -> Path:
    """A run dir as an interrupted run leaves it: the resolved recipe but no results.json."""
    run_dir = copy_run(finished_run, dst)
    for name in ("results.json", "report.html", "summary.md"):
        (run_dir / name).unlink()
    shutil.rmtree(run_dir / "model")
    return run_dir


def test_unfinished_run_dir_needs_resume(tmp_path: Path, finished_run: Path) -> None:
    run_dir = unfinished_run(finished_run, tmp_path / "unfinished")
    result = run_bad(tmp_path, ["run", finished_run.parents[1] / "recipe.yaml", "-o", run_dir], run_dir)
    assert_bad_input(result, f"{run_dir}: holds an unfinished run; pass --resume to continue it or --force to restart")


def test_bench_never_writes_into_a_run_dir_or_a_file(tmp_path: Path, finished_run: Path, glue_ok: Path) -> None:
    """bench --out into an unfinished run wrote its results.json there: the run then read as
    finished, and --resume was refused with only --force (deleting its work) offered. A file as
    --out failed after all the measuring. Both are refused before any model is read."""
    run_dir = unfinished_run(finished_run, tmp_path / "unfinished")
    (tmp_path / "afile").write_text("x")
    bench = ["bench", finished_run / "teacher", "--task", "sst2", "--data-dir", glue_ok, "--rounds", "1", "--out"]
    assert_bad_input(run_bad(tmp_path, [*bench, run_dir], run_dir),
                     f"--out {run_dir}: is a tinyplm run directory; a results.json written there would mark the run")
    assert_bad_input(run_bad(tmp_path, [*bench, tmp_path / "afile" / "sub"]),
                     f"--out: {tmp_path / 'afile'}: is a file, so the output destination")


def test_resume_with_a_changed_recipe_is_refused(tmp_path: Path, finished_run: Path) -> None:
    run_dir = unfinished_run(finished_run, tmp_path / "unfinished")
    args = ["run", finished_run.parents[1] / "recipe.yaml", "task.max_length=16", "-o", run_dir, "--resume"]
    result = run_bad(tmp_path, args, run_dir)
    assert_bad_input(result, f"{run_dir / 'config.resolved.yaml'}: the recipe changed since this run started")


def test_foreign_dir_is_never_deleted(tmp_path: Path, finished_run: Path) -> None:
    other = tmp_path / "thesis"
    other.mkdir()
    (other / "chapter1.tex").write_text("precious\n")
    recipe = finished_run.parents[1] / "recipe.yaml"
    result = run_bad(tmp_path, ["run", recipe, "-o", other], other)
    assert_bad_input(result, f"{other}: exists and is not a tinyplm run directory")
    result = run_bad(tmp_path, ["run", recipe, "-o", other, "--force"], other)
    assert_bad_input(result, f"{other}: not a tinyplm run directory (no config.resolved.yaml); refusing to delete it")


# ----------------------------------------------------------------------------- other subcommands


def test_report_without_results_json(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "summary.md").write_text("old summary\n")
    before = snapshot(run_dir)
    result = run_bad(tmp_path, ["report", run_dir], run_dir)
    assert_bad_input(result, f"{run_dir / 'results.json'}: file not found; expected a results.json")
    assert added(before, run_dir) == []


def test_report_with_corrupt_results_json(tmp_path: Path, finished_run: Path) -> None:
    run_dir = copy_run(finished_run, tmp_path / "copy")
    (run_dir / "results.json").write_text('{"task": "sst2", "stages": ')
    before = snapshot(run_dir)
    result = run_bad(tmp_path, ["report", run_dir], run_dir)
    assert_bad_input(result, f"{run_dir / 'results.json'}: cannot be read as JSON")
    assert added(before, run_dir) == []


def test_evaluate_unknown_task(tmp_path: Path, model_dir: Path, glue_ok: Path) -> None:
    result = run_bad(tmp_path, ["evaluate", model_dir, "--task", "qqq", "--data-dir", glue_ok], model_dir)
    assert_bad_input(result, "unknown task 'qqq'")


def test_distill_names_the_shape_options_left_out(tmp_path: Path) -> None:
    from conftest import make_tiny_model_dir
    from helpers_cli import assert_bad_input, cli

    teacher = make_tiny_model_dir(tmp_path / "teacher")
    result = cli(["distill", "--teacher", str(teacher), "--task", "sst2", "--layers", "1", "--out", "o"], cwd=tmp_path)
    assert_bad_input(result, "takes all of --layers, --hidden, --heads and --ffn; --hidden, --heads, --ffn missing")


@pytest.mark.parametrize(("args", "said"), [
    (["finetune", "--task", "sst2", "--epochs", "0"], "command line: --epochs (teacher.finetune.epochs): "),
    (["finetune", "--task", "sst2", "--max-length", "4"], "command line: --max-length (task.max_length): "),
    (["finetune", "--task", "sst2", "teacher.finetune.epochs=0"],
     "override 'teacher.finetune.epochs=0': teacher.finetune.epochs: "),
    (["distill", "--teacher", "t", "--task", "sst2", "--temperature", "0"],
     "command line: --temperature (students[0].objective.temperature): "),
    (["distill", "--teacher", "t", "--task", "sst2", "--layers", "0", "--hidden", "8", "--heads", "2", "--ffn", "8"],
     "command line: --layers (students[0].shape.layers): "),
])
def test_flag_commands_name_the_option_or_override_that_set_a_bad_value(tmp_path: Path, args: list[str],
                                                                        said: str) -> None:
    """``finetune`` and ``distill`` make a recipe from their options: a bad value is named as the user
    typed it (the option beside the recipe key; an override as written), before anything is read."""
    from helpers_cli import assert_bad_input, cli

    result = cli([*args, "--out", "o"], cwd=tmp_path)
    assert_bad_input(result, said)
    assert not (tmp_path / "o").exists()


def test_a_run_dir_given_on_the_command_line_is_the_one_checked(tmp_path: Path, model_dir: Path,
                                                                glue_ok: Path) -> None:
    """A recipe copied from another machine, its output_dir unwritable here (under a file): with -o
    the run goes elsewhere, yet it was refused over the output_dir it does not use."""
    (tmp_path / "afile").write_text("x")
    recipe = recipe_file(tmp_path, glue_ok, model_dir, output_dir=str(tmp_path / "afile" / "{name}"))
    refused = cli(["run", recipe.name], tmp_path)
    assert_bad_input(refused, f"{tmp_path / 'afile'}: is a file, so the run directory")
    result = cli(["run", recipe.name, "-o", "elsewhere"], tmp_path)
    assert result.returncode == 0, result.output
    assert (tmp_path / "elsewhere" / "results.json").is_file()
