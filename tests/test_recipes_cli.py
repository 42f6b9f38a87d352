"""``tinyplm validate`` exits 0 on every shipped recipe, through the CLI, from the repository root.

With its inputs checked (the default): a run recipe's task data is read and its teacher loaded; a
pre-training recipe (a top-level ``objective``) has its corpus read and its init checkpoint and
tokenizer checked. Those inputs are in ``../shared/data`` and the packaged MiniLM; a recipe whose
data is not there is skipped, naming what is missing. ``--no-inputs`` (keys and values only) runs on
every recipe, with or without the data.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import REPO, SHARED_DATA, make_tiny_mlm_dir, make_tiny_model_dir, write_tiny_corpus
from helpers_cli import Result, cli
from tinyplm.config.load import is_pretrain_recipe
from tinyplm.tasks.embedding_task import EMBEDDING_TASK

RECIPES = sorted((REPO / "recipes").rglob("*.yaml"))


def rel(path: Path) -> str:
    """The recipe path relative to the repository root, as the README and the recipes write it."""
    return path.relative_to(REPO).as_posix()


def shown(result: Result) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}"


def assert_ok(result: Result, recipe: str) -> None:
    """Exit 0, no traceback, and the ``<recipe>: ok (...)`` line."""
    assert result.returncode == 0, shown(result)
    assert "Traceback" not in result.output, shown(result)
    assert f"{recipe}: ok (" in result.stdout.replace("\n", ""), shown(result)


@pytest.fixture(scope="module")
def tiny_tokenizer(tmp_path_factory) -> Path:
    """A small WordPiece tokenizer made with ``tinyplm tokenizer train`` on a tiny corpus in tmp."""
    tmp = tmp_path_factory.mktemp("tok")
    corpus = write_tiny_corpus(tmp / "corpus", paragraphs=30)
    result = cli(["tokenizer", "train", corpus, "--kind", "wordpiece", "--vocab-size", "200", "--min-frequency", "1",
                  "--out", tmp / "tok"], cwd=tmp)
    assert result.returncode == 0, shown(result)
    assert (tmp / "tok" / "tokenizer.json").is_file()
    return tmp / "tok"


def prior_artefacts(path: Path, tokenizer: Path, mlm: Path, classifier: Path | None = None) -> list[str]:
    """Overrides standing in for what a recipe reads that the README's previous command makes.

    recipes/pretrain/mlm_small.yaml reads ``tokenizer: runs/tok16k``, which the README's
    ``tinyplm tokenizer train ... --out runs/tok16k`` makes in the repository, and the spoiler
    family recipes and recipes/glue/mrpc_base.yaml read ``augment.mlm: runs/minilm-mlm`` (``tinyplm
    fit-mlm-head``), which preflight checks; these tests write nothing into the repository, so they point at a tokenizer
    made in tmp (same command, tiny corpus) and a tiny masked-LM dir. recipes/glue/sst2_pareto_variant.yaml
    reads the teacher and student recipes/glue/sst2_pareto.yaml makes (``runs/sst2_pareto/``), and
    recipes/glue/sst2_static.yaml the demo's teacher (``runs/sst2_demo/teacher``): a tiny classifier
    stands in for them (and for the static tables' encoder, which must share the teacher's
    vocabulary; its width 32 takes 16 table dimensions). No other shipped recipe reads an artefact of
    an earlier command (sst2_static's augmentation reads the masked LM too).
    """
    if rel(path) == "recipes/glue/sst2_pareto_variant.yaml" and classifier is not None:
        return [f"teacher.model={classifier}", f"students.0.init_from={classifier}"]
    if rel(path) == "recipes/glue/sst2_static.yaml" and classifier is not None:  # the demo's teacher
        import yaml

        static = [i for i, s in enumerate(yaml.safe_load(path.read_text())["students"]) if "family" in s]
        return [f"teacher.model={classifier}", f"augment.mlm={mlm}",
                *(f"students.{i}.family.{key}" for i in static for key in (f"encoder={classifier}", "static.dims=16"))]
    if rel(path) == "recipes/pretrain/mlm_small.yaml":
        return [f"tokenizer={tokenizer}"]
    if "augment: {mlm: runs/minilm-mlm" in path.read_text(encoding="utf-8"):
        return [f"augment.mlm={mlm}"]
    return []


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory) -> Path:
    """One ``TINYPLM_CACHE`` for every recipe validated here, so a model fetched from PyPI (the
    base recipes' all-mpnet-base-v2, 405 MB of wheels) is fetched once, not once per recipe. A
    verified copy already in the user's cache is linked in, read-only use, and not fetched again."""
    from tinyplm.models.split_zip import VERIFIED, cache_root

    cache = tmp_path_factory.mktemp("cache")
    (cache / "models").mkdir()
    mine = cache_root() / "models"
    for folder in mine.glob("*/") if mine.is_dir() else ():
        if (folder / VERIFIED).is_file():
            (cache / "models" / folder.name).symlink_to(folder, target_is_directory=True)
    return cache


def room_to_fetch(path: Path, cache: Path) -> str | None:
    """Why the recipe's teacher cannot be fetched into ``cache`` (too little free disk), or None."""
    from tinyplm.config import load_recipe
    from tinyplm.errors import ModelError
    from tinyplm.models.split_zip import BY_ALIAS, VERIFIED, check_room

    entry = BY_ALIAS.get(load_recipe(path).teacher.model.lower())
    if entry is None or (cache / "models" / entry.name / VERIFIED).is_file():
        return None
    try:
        check_room(entry, cache / "models")
    except ModelError as exc:
        return str(exc)
    return None


@pytest.fixture(scope="module")
def tiny_classifier(tmp_path_factory) -> Path:
    """A tiny random BERT classifier, standing in for a fine-tuned teacher and a student made by
    an earlier recipe."""
    return make_tiny_model_dir(tmp_path_factory.mktemp("clf") / "clf")


@pytest.fixture(scope="module")
def tiny_mlm(tmp_path_factory) -> Path:
    """A tiny random BERT with a masked-LM head, standing in for ``runs/minilm-mlm``."""
    return make_tiny_mlm_dir(tmp_path_factory.mktemp("mlm") / "mlm")


def missing_inputs(path: Path, overrides: list[str]) -> list[str]:
    """The files the recipe reads from ../shared/data that are not there (empty: all present)."""
    from tinyplm import tasks
    from tinyplm.config import load_recipe
    from tinyplm.config.load import is_pretrain_recipe
    from tinyplm.config.pretrain import PretrainRecipe

    if is_pretrain_recipe(path):
        corpus = load_recipe(path, overrides, schema=PretrainRecipe).corpus.paths
        return [p for p in corpus if not (REPO / p).exists()]  # relative to the working directory, the repo root
    task = load_recipe(path, overrides).task
    data_dir = task.data_dir or str(SHARED_DATA)
    if task.name == EMBEDDING_TASK:  # its eval sets and STS-B's training pairs (texts and held-out pairs)
        from tinyplm.tasks.embedding_task import parse_eval_set
        from tinyplm.tasks.paths import resolve_glue_dir

        files = [parse_eval_set(e, data_dir).path for e in task.eval_sets or ("stsb", "squad")]
        files.append(resolve_glue_dir(data_dir) / "STS-B" / "train.tsv")
        return [str(f) for f in files if not f.exists()]
    present = tasks.get(task.name, data_dir).data_present()
    return [f"{task.name} {split}" for split, there in present.items() if not there]


def test_recipes_were_found() -> None:
    assert len(RECIPES) >= 10, f"expected the shipped recipes under {REPO / 'recipes'}, found {RECIPES}"
    assert any(p.parent.name == "pretrain" for p in RECIPES)


@pytest.mark.integration
@pytest.mark.parametrize("path", RECIPES, ids=rel)
def test_validate_checks_inputs_and_exits_0(path: Path, shared_data: Path, tiny_tokenizer: Path, tiny_mlm: Path,
                                            tiny_classifier: Path, model_cache: Path) -> None:
    overrides = prior_artefacts(path, tiny_tokenizer, tiny_mlm, tiny_classifier)
    missing = missing_inputs(path, overrides)
    if missing:
        pytest.skip(f"{rel(path)} reads data that {shared_data} does not hold: {', '.join(missing)}")
    if not is_pretrain_recipe(path) and (no_room := room_to_fetch(path, model_cache)):
        pytest.skip(f"{rel(path)}: its teacher cannot be fetched on this machine's disk: {no_room}")
    env = {"TINYPLM_DATA": str(shared_data), "TINYPLM_CACHE": str(model_cache)}
    result = cli(["validate", rel(path), *overrides], cwd=REPO, env=env)
    assert_ok(result, rel(path))
    if path.parent.name == "pretrain":
        assert "(pre-training, objective" in result.stdout and "held-out texts" in result.stdout, shown(result)
    else:
        assert " train / " in result.stdout and "teacher " in result.stdout, shown(result)


@pytest.mark.parametrize("path", RECIPES, ids=rel)
def test_validate_without_inputs_exits_0(path: Path, tmp_path: Path) -> None:
    """Keys and values only: needs neither ../shared/data nor the tokenizer the recipe names."""
    result = cli(["validate", rel(path), "--no-inputs"], cwd=REPO, env={"TINYPLM_CACHE": str(tmp_path / "cache")})
    assert_ok(result, rel(path))


def test_validate_counts_the_training_examples_the_run_takes(tmp_path: Path) -> None:
    from conftest import make_tiny_glue, tiny_recipe, write_recipe

    recipe = tiny_recipe(tmp_path, make_tiny_model_dir(tmp_path / "m"), make_tiny_glue(tmp_path / "glue", 16, 8))
    recipe["task"]["max_train_examples"] = 4
    result = cli(["validate", str(write_recipe(tmp_path / "r.yaml", recipe))], cwd=tmp_path)
    assert result.returncode == 0 and "4 of 16 train / 8 dev" in result.stdout, result.output
