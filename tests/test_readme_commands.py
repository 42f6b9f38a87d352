"""Every command line README.md and the docs/ site show is exercised through the CLI, so neither can rot.

README.md and every docs/**/*.md page are parsed at test time: each line of a ```bash block and each
inline code span that starts with ``tinyplm `` or ``python benchmarks/`` (an ``accelerate launch ...
-m tinyplm.cli ...`` line counts as the ``tinyplm`` command it launches). :data:`DOC_LINES` maps each
such line, as written (once, however many pages show it), to how it is exercised; a test keeps the
two in step both ways. README.md is the front door: it opens with the two commands (``make demo``,
``make test``), its links into docs/ resolve, and its demo table is the one docs/results/demo.md holds.

Every line gets the cheap check: its subcommand exists, the Typer/click command parses the line's
arguments (every option it uses is accepted, values have the right type, required options are
there), and a recipe it names exists and loads with the line's overrides; a benchmark line's script
answers ``--help`` and lists every option the line uses.

Each line is then either run here for real, or marked long in the docs: a line of a ```bash block
whose comment starts with ``long:`` (``tinyplm run recipes/glue/sst2_base.yaml  # long: an
hour``) is not run by the tests, and the comment tells the reader why. A test holds the rule both ways: a
line run here carries no marker, and a line not run here is marked at every ```bash block that shows
it (an inline code span is a mention of such a block and needs none; a line shown only inline must
run here). docs/architecture.md states the convention.

The lines run here run in a tiny "world" laid out like the repository (``helpers_doc_world``): a
tmp ``main/`` as the working directory beside a tmp ``shared/data`` of tiny data in the official
layouts, with ``TINYPLM_DATA`` pointing there, so relative paths such as ``runs/rte-l3`` or
``../shared/data/squad/dev-v1.1.json`` mean what they mean in the docs. A line runs as written, or
with the substitutions its table entry lists (a model alias replaced by a tiny model, a budget
shrunk, arguments added); the substituted command keeps the line's program and every option it
uses, which a test checks. The lines that read ``runs/sst2_demo`` read a real run of the demo recipe
shrunk to the tiny teacher (the ``demo_run`` fixture). ``tinyplm`` lines run in-process through
``helpers_cli.cli`` (``TINYPLM_TEST_SUBPROCESS=1`` for subprocesses), benchmark scripts in-process as
``__main__``; the ``accelerate launch`` and ``tinyplm serve`` lines run as subprocesses.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import re
import shlex
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

import helpers_warm as warm
from conftest import REPO, tiny_vocab
from helpers_cli import Result, cli
from helpers_doc_world import World, make_world, ok, run_program, run_script, sentence

README = REPO / "README.md"
DOCS = REPO / "docs"
PROGRAMS = ("tinyplm ", "python benchmarks/")


# --------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Way:
    """How one documented command line is exercised.

    ``test`` names the test in this file that runs it for real (None: only the cheap check, the docs
    mark the line long, and ``why`` says what tests its parts instead). For a real run, ``replace``
    maps a token of the line to the token used and ``add`` lists arguments appended to the program's
    arguments; both may name the tiny teacher as ``{teacher}`` and the data root as ``{data}`` (see
    ``helpers_doc_world.World``). ``why`` says what the substitutions are for.
    """

    test: str | None
    why: str
    replace: dict[str, str] = field(default_factory=dict)
    add: tuple[str, ...] = ()


#: Shrinks the shipped GLUE recipes to a tiny run: the tiny 6-layer teacher, 2 optimiser steps per
#: training stage, a few sentences timed once.
TINY_GLUE_RUN = ("teacher.model={teacher}", "teacher.finetune.max_steps=2", "students.*.train.max_steps=2",
                 "measure.latency_sentences=4", "measure.throughput_sentences=8", "measure.rounds=1",
                 "measure.warmup=1")

#: The same for the pre-training recipes: a tiny encoder, 2 steps, a few held-out texts.
TINY_PRETRAIN = ("train.max_steps=2", "corpus.max_length=32", "eval.max_texts=4", "eval.pppl_texts=2",
                 "eval.pppl_max_length=16")

#: The demo recipe shrunk the same way: 8 held-out sentences of any length, a student as wide as the
#: tiny teacher, and one runtime candidate each (ONNX Runtime int8 for the teacher, OpenVINO with its
#: int8-stored weights for the student).
TINY_DEMO = (*TINY_GLUE_RUN, "task.holdout=8", "task.holdout_min_words=0", "students.1.shape.hidden=32",
             "students.1.shape.heads=4", "students.1.shape.ffn=24",
             "students.0.compress.0.candidates=[onnx_dynamic_int8]", "students.1.compress.3.candidates=[openvino]")

#: The demo recipe's teacher alone, shrunk: for the lines that are about the run, not its students.
TINY_TEACHER_ONLY = (*TINY_GLUE_RUN, "task.holdout=8", "task.holdout_min_words=0", "students=[]")

#: benchmarks/finetune_methods.py on the tiny teacher and the tiny SST-2.
TINY_FINETUNE_METHODS = ("--model", "{teacher}", "--data-dir", "{data}/glue", "--max-length", "32", "--threads",
                         "1", "--student-layers", "1", "--eval-every", "2")

#: Each command line of README.md and docs/ (exactly as written, comment stripped) -> how it is exercised.
DOC_LINES: dict[str, Way] = {
    "tinyplm tasks": Way("test_tasks_as_written", "as written, from the repository root"),
    "tinyplm validate recipes/glue/mrpc_demo.yaml": Way(
        "test_validate_mrpc_demo_as_written", "as written, from the repository root, on ../shared/data and the "
        "packaged MiniLM (skips when ../shared/data is absent)"),
    "tinyplm run recipes/glue/mrpc_demo.yaml": Way(
        "test_mrpc_demo_run_then_resume", "the shipped recipe, shrunk by overrides to the tiny teacher, "
        "2 steps per stage and 1 timing round", add=TINY_GLUE_RUN),
    "tinyplm run recipes/glue/mrpc_demo.yaml teacher.finetune.budget_minutes=2 students.*.train.lr=5e-5": Way(
        "test_mrpc_demo_run_with_the_readme_overrides", "the line's overrides kept (and checked in "
        "config.resolved.yaml), plus the tiny overrides and its own output_dir",
        add=(*TINY_GLUE_RUN, "output_dir=runs/mrpc_overrides")),
    "tinyplm run recipes/glue/mrpc_demo.yaml --resume": Way(
        "test_mrpc_demo_run_then_resume", "on the finished run of the plain line, same overrides: a "
        "finished run is not resumed, exit 2 naming it", add=TINY_GLUE_RUN),
    "tinyplm finetune --task rte --model minilm-l6 --out runs/rte-teacher --budget-minutes 5": Way(
        "test_rte_flow", "minilm-l6 -> the tiny teacher; 2 epochs of tiny RTE (ends well within the budget)",
        replace={"minilm-l6": "{teacher}"}, add=("--epochs", "2", "--lr", "1e-3")),
    "tinyplm distill --teacher runs/rte-teacher/teacher --task rte --teacher-layers 1,3,5 --out runs/rte-l3": Way(
        "test_rte_flow", "as written, plus 2 epochs (the tiny teacher has 6 layers, so 1,3,5 exist)",
        add=("--epochs", "2")),
    "tinyplm evaluate runs/rte-l3/model --task rte": Way("test_rte_flow", "as written"),
    "tinyplm bench runs/rte-teacher/teacher runs/rte-l3/model --task rte --out runs/rte-bench": Way(
        "test_rte_flow", "as written, plus --rounds 1", add=("--rounds", "1")),
    "tinyplm report runs/rte-l3": Way("test_rte_flow", "as written, after deleting the reports it rebuilds"),
    "tinyplm bench A B --task T --runtimes torch,onnxruntime,openvino": Way(
        "test_rte_flow", "A B T -> the flow's teacher and student on rte, plus --rounds 1 and its own --out",
        replace={"A": "runs/rte-teacher/teacher", "B": "runs/rte-l3/model", "T": "rte"},
        add=("--rounds", "1", "--out", "runs/rte-runtimes")),
    "tinyplm validate": Way("test_subcommands_named_in_prose", "the subcommand named in prose: its --help",
                            add=("--help",)),
    "tinyplm report": Way("test_subcommands_named_in_prose", "the subcommand named in prose: its --help",
                          add=("--help",)),
    "tinyplm embed-eval": Way("test_subcommands_named_in_prose", "the subcommand named in prose: its --help",
                              add=("--help",)),
    **{f"tinyplm {name}": Way("test_subcommands_named_in_prose", "the subcommand named in prose: its --help",
                              add=("--help",)) for name in ("run", "evaluate", "bench")},
    "tinyplm export RUN_DIR --onnx": Way("test_rte_flow", "RUN_DIR -> runs/rte-l3", replace={"RUN_DIR": "runs/rte-l3"}),
    "tinyplm run recipes/squad/v1_demo.yaml": Way(
        "test_squad_flow", "the shipped recipe, shrunk like the MRPC run", add=TINY_GLUE_RUN),
    "tinyplm run recipes/conll/ner_demo.yaml": Way(
        "test_conll_demo_run", "the shipped recipe, shrunk like the MRPC run", add=TINY_GLUE_RUN),
    "tinyplm evaluate runs/squad_v1_demo/model --task squad --max-length 256 --predictions preds.json": Way(
        "test_squad_flow", "as written, on the model of the shrunk SQuAD run"),
    "tinyplm evaluate-squad preds.json ../shared/data/squad/dev-v1.1.json": Way(
        "test_squad_flow", "as written: the predictions of the line before against the tiny world's dev file"),
    "python benchmarks/squad.py": Way(
        "test_task_benchmarks", "the recipe shrunk like the SQuAD run (--set each override), its own --out",
        add=(*(a for o in TINY_GLUE_RUN for a in ("--set", o)), "--out", "runs/squad-bench")),
    "python benchmarks/conll.py": Way(
        "test_task_benchmarks", "the recipe shrunk like the CoNLL run (--set each override), its own --out",
        add=(*(a for o in TINY_GLUE_RUN for a in ("--set", o)), "--out", "runs/conll-bench")),
    "tinyplm tokenizer train ../shared/data/corpus --kind wordpiece --vocab-size 16000 --out runs/tok16k": Way(
        "test_pretrain_flow", "as written, on the tiny world's corpus"),
    "tinyplm pretrain recipes/pretrain/mlm_small.yaml": Way(
        "test_pretrain_flow", "the shipped recipe with the tokenizer of the line before, shrunk to a 1-layer "
        "encoder and 2 steps", add=("shape.layers=1", "shape.hidden=32", "shape.heads=2", "shape.ffn=37",
                                    *TINY_PRETRAIN)),
    "tinyplm pretrain recipes/pretrain/continue_minilm.yaml": Way(
        "test_pretrain_flow", "init minilm-l6 -> the tiny classifier (no MLM head: one is fitted first, "
        "2 steps), shrunk to 2 steps", add=("init={teacher}", "fit_head_steps=2", *TINY_PRETRAIN)),
    "accelerate launch --multi_gpu --num_processes 2 -m tinyplm.cli run recipes/glue/rte_demo.yaml": Way(
        "test_accelerate_launch_runs_two_processes", "the shipped recipe shrunk like the MRPC run, launched as "
        "written (a subprocess) plus --main_process_port <a free port>; results.json must say 2 processes",
        add=TINY_GLUE_RUN),
    "tinyplm fit-mlm-head minilm-l6 --out runs/minilm-mlm --steps 500": Way(
        "test_fit_mlm_head_then_augment", "minilm-l6 -> the tiny classifier; 4 steps on the tiny corpus",
        replace={"minilm-l6": "{teacher}", "500": "4"}, add=("--batch-size", "8", "--max-length", "32")),
    "tinyplm augment TASK --mlm DIR --out FILE.jsonl": Way(
        "test_fit_mlm_head_then_augment", "TASK -> rte, DIR -> the head fitted by the line before, "
        "2 copies of each tiny RTE example", replace={"TASK": "rte", "DIR": "runs/minilm-mlm",
                                                      "FILE.jsonl": "runs/rte-aug.jsonl"},
        add=("--copies", "2")),
    "python benchmarks/distill_ablation.py --task mrpc --budget-minutes 3 --seeds 3": Way(
        None, "cheap check only: fits an MLM head, general-distils a student and trains 5 variants x 3 seeds "
        "(hours; its parts are tested in tests/test_benchmarks.py)"),
    "python benchmarks/compress_pareto.py --task sst2": Way(
        None, "cheap check only: a teacher, a student and 23 variants, each trained for minutes; "
        "tests/test_benchmarks.py tests the script's parts"),
    "python benchmarks/compress_pareto.py --task mrpc --variants student-combined-ov teacher-small-ov "
    "teacher-ov-int8": Way(
        None, "cheap check only: the run behind docs/results/compress-pareto.md (29 minutes of training); "
        "tests/test_benchmarks.py tests the script's parts"),
    "tinyplm run recipes/glue/sst2_demo.yaml": Way(
        "test_sst2_demo_run", "the demo recipe shrunk (the demo_run fixture, which the lines on runs/sst2_demo "
        "read): the tiny teacher, 2 steps a stage, 8 held-out sentences, a student as wide as the tiny teacher, "
        "one runtime candidate each", add=TINY_DEMO),
    "tinyplm run recipes/glue/sst2_demo.yaml --track": Way(
        "test_tracking_lines", "the demo recipe's teacher alone (students=[]), shrunk, in its own output_dir; "
        "the MLflow store beside it", add=(*TINY_TEACHER_ONLY, "output_dir=runs/sst2_tracked")),
    "tinyplm run recipes/glue/sst2_demo.yaml tracking.tensorboard=true": Way(
        "test_tracking_lines", "the demo recipe's teacher alone (students=[]), shrunk, in its own output_dir; "
        "TensorBoard events in it", add=(*TINY_TEACHER_ONLY, "output_dir=runs/sst2_tensorboard")),
    "python benchmarks/serve_load.py runs/sst2_demo/model runs/sst2_demo/teacher": Way(
        None, "cheap check only: the run behind docs/results/serve-load.md (minutes of load on four servers); "
        "tests/serve/test_serve_process.py runs its flood and SIGTERM checks on a tiny model"),
    "tinyplm embed-eval minilm-l6": Way(
        "test_embed_eval_lines", "minilm-l6 -> a tiny sentence model (mean pooling, normalised) on the tiny world's "
        "STS-B and SQuAD dev", replace={"minilm-l6": "{embedder}"}),
    "tinyplm embed-eval minilm-l6 --no-squad --pairs my_pairs.csv --beir my_retrieval_set --out scores.json": Way(
        "test_embed_eval_lines", "minilm-l6 -> the tiny sentence model; my_pairs.csv and my_retrieval_set written by "
        "the test", replace={"minilm-l6": "{embedder}"}),
    "python benchmarks/embed_reference.py --threads 2": Way(
        None, "cheap check only: sentence-transformers' own encode over STS-B dev and all of SQuAD dev (minutes); "
        "tests/evaluate/test_embedding_metrics.py tests the metrics it calls"),
    "python benchmarks/warm_shapes.py runs/sst2_demo/model": Way(
        "test_warm_shapes_line", "on the tiny demo run's model/, 20 sentences and 2 rounds",
        add=("--sentences", "20", "--rounds", "2", "--max-batch", "4")),
    "python benchmarks/pretrain_objectives.py --budget-minutes 10": Way(
        None, "cheap check only: pre-trains one model per objective, then fine-tunes each on two tasks"),
    "tinyplm predict runs/sst2_demo --input reviews.txt --output predictions.jsonl": Way(
        "test_predict_line", "as written, on a run dir laid out as tinyplm writes one (config.resolved.yaml with "
        "task.max_length 32; model/ the tiny teacher) and a reviews.txt of tiny sentences"),
    "tinyplm predict my-sentence-model/ --input sentences.txt --output vectors.npy": Way(
        "test_predict_vectors_line", "my-sentence-model/ -> the doc world's tiny sentence model; sentences.txt "
        "written by the test", replace={"my-sentence-model/": "{embedder}"}),
    "tinyplm serve my-sentence-model/ --port 8000": Way(
        None, "cheap check only: needs an embedding model dir; tests/serve/test_embeddings.py serves tiny ones to "
        "httpx and the openai package"),
    "tinyplm serve runs/sst2_demo --port 8000": Way(
        "test_serve_line", "a subprocess serving the tiny demo run, port 8000 -> 0 (a free one): /ready, one "
        "POST /predict, then SIGTERM and exit 0", replace={"8000": "0"}),
    "python benchmarks/serve_load.py runs/sst2_demo/model --levels 1,32 --flood-requests 50 "
    "--sigterm-requests 200": Way(
        None, "cheap check only: two servers under load; tests/serve/test_serve_process.py runs its flood and SIGTERM "
        "checks on a tiny model"),
    "python benchmarks/serve_load.py runs/sst2_demo/model runs/sst2_demo/teacher --requests 2000": Way(
        None, "cheap check only: minutes of load on four servers; tests/serve/test_serve_process.py runs its flood "
        "and SIGTERM checks on a tiny model"),
    "tinyplm run recipes/glue/sst2_demo.yaml teacher.finetune.method=lora teacher.finetune.lr=1e-3": Way(
        "test_tracking_lines", "the demo recipe's teacher alone (students=[]), shrunk, in its own output_dir; "
        "the line's overrides checked in config.resolved.yaml",
        add=(*TINY_TEACHER_ONLY, "output_dir=runs/sst2_lora")),
    "python benchmarks/finetune_methods.py --task sst2 --seeds 3 --budget-minutes 4 --distill-minutes 3": Way(
        None, "cheap check only: two hours; tests/finetune/test_finetune_bench.py runs the script on a tiny model"),
    "python benchmarks/finetune_methods.py --task sst2 --methods full,lora --seeds 1 --budget-minutes 4 "
    "--distill-minutes 3 --teacher-minutes 10": Way(
        None, "cheap check only: 40 minutes; tests/finetune/test_finetune_bench.py runs --teacher-minutes on a "
        "tiny model, and test_finetune_methods_line the same script's short line here"),
    "python benchmarks/finetune_methods.py --task sst2 --methods full,lora,bitfit --seeds 1 --budget-minutes 2 "
    "--max-train-examples 3000": Way(
        "test_finetune_methods_line", "the tiny teacher as the model, budgets of a fraction of a second, a "
        "1-layer student, its own --out", replace={"2": "0.005"},
        add=(*TINY_FINETUNE_METHODS, "--distill-minutes", "0.005", "--out", "runs/finetune_methods_short")),
    "python benchmarks/student_families.py --teacher runs/sst2_demo/teacher --task sst2": Way(
        "test_demo_run_benchmarks", "the tiny demo run's teacher; 1-layer students of 2 steps, its own --out",
        add=("--shape", "1,16,2,24", "--max-steps", "2", "--eval-every", "1", "--batch-size", "8",
             "--max-length", "16", "--out", "runs/student_families")),
    "tinyplm run recipes/spoilers/goodreads_family.yaml": Way(
        None, "cheap check only: a 40-minute run; tests/run/test_classic_run.py runs every classic student on a "
        "tiny BERT"),
    "tinyplm run recipes/spoilers/tvtropes_family.yaml": Way(
        None, "cheap check only: hours on a 2-core CPU; tests/run/test_classic_run.py runs every classic student on a "
        "tiny BERT"),
    "tinyplm run recipes/spoilers/tvtropes_context.yaml": Way(
        None, "cheap check only: a 40-minute fine-tune; tests/run/test_classic_run.py runs a TV Tropes recipe "
        "with page context on a tiny BERT"),
    "tinyplm evaluate runs/tvtropes_context/teacher --task tvtropes_spoilers": Way(
        None, "cheap check only: needs the context run's teacher; tests/run/test_classic_run.py evaluates a tiny "
        "one the same way"),
    "python benchmarks/nlm_family.py --task goodreads_spoilers": Way(
        None, "cheap check only: 40 minutes on a 2-core CPU; tests/test_nlm_family_bench.py runs main() on a tiny "
        "recipe"),
    "python benchmarks/nlm_family.py --task tvtropes_spoilers": Way(
        None, "cheap check only: hours on a 2-core CPU; tests/test_nlm_family_bench.py runs main() on a tiny recipe"),
    "python benchmarks/tvtropes_gaps.py --teacher runs/tvtropes_family/teacher": Way(
        None, "cheap check only: needs the family run's teacher and the shipped TV Tropes files; "
        "tests/test_tvtropes_gaps_bench.py runs main() on tiny files and a tiny teacher"),
    "tinyplm probe minilm-l6 --task conll2003-pos --train-sentences 6000 --dev-sentences 1000": Way(
        "test_probe_and_heads_lines", "minilm-l6 -> the tiny teacher, on the tiny CoNLL-2003 (all its sentences)",
        replace={"minilm-l6": "{teacher}"}),
    "tinyplm probe runs/sst2_demo --task conll2003-pos --train-sentences 6000 --dev-sentences 1000": Way(
        None, "cheap check only: probes every float stage of the demo run with its random-encoder control; "
        "tests/run/test_analysis.py probes a tiny run dir of two stages"),
    "tinyplm heads minilm-l6 --task sst2": Way(
        "test_probe_and_heads_lines", "minilm-l6 -> the tiny teacher", replace={"minilm-l6": "{teacher}"}),
    "tinyplm heads runs/sst2_demo --task sst2 --show 1:3,2:0": Way(
        None, "cheap check only: every stage of the demo run over SST-2 dev, a heatmap per statistic and stage; "
        "tests/run/test_analysis.py runs heads (with --show) on tiny models and a pruned stage"),
    "tinyplm run recipes/glue_table/base.yaml task.name=wnli seed=1 -o runs/glue_trials/wnli-s1": Way(
        None, "cheap check only: fetches all-mpnet-base-v2 (438 MB), then one trial of the GLUE sweep; "
        "tests/run/test_logits_from.py runs a tiny recipe whose students learn the logits of the teacher's runtime "
        "stage, tests/report/test_glue_table.py the table over runs"),
    "tinyplm glue-table docs/results/glue_runs --out runs/glue_table": Way(
        "test_glue_table_of_the_recorded_runs", "as written: the GLUE runs docs/results/glue_runs records (their "
        "results.json files), read through the world's link to docs/"),
    **{f"tinyplm run recipes/glue_table/paradigms.yaml task.name={task} -o runs/paradigm_trials/{task}-s1": Way(
        None, "cheap check only: fetches all-mpnet-base-v2 (438 MB), then two to two and a half hours of one "
        "task's paradigm run; tests/report/test_paradigm_table.py builds the table over runs")
       for task in ("mrpc", "stsb", "sst2")},
    **{f"tinyplm run docs/results/cola_augment_runs/{r}/config.resolved.yaml -o runs/cola/{r}": Way(
        None, "cheap check only: a recorded CoLA run (fetches all-mpnet-base-v2, then 17-75 minutes); "
        "tests/distill/test_augment.py tests the same_kind candidates it compares, "
        "tests/run/test_task_corpus.py the corpus sentences, tests/distill/test_aligned_pieces.py the "
        "layer-wise terms across tokenizers")
       for r in ("a", "b", "c", "d", "e")},
    "tinyplm run docs/results/rte_transfer_run/config.resolved.yaml -o runs/rte_transfer": Way(
        None, "cheap check only: a recorded RTE run (fetches all-mpnet-base-v2, then 80 minutes); "
        "tests/run/test_task_corpus.py tests the corpus pairs it adds"),
    "tinyplm run docs/results/rte_transfer_run/c/config.resolved.yaml -o runs/rte_c": Way(
        None, "cheap check only: a recorded RTE run on runs/rte_transfer's teacher (47 minutes); "
        "tests/test_stages.py runs an augmented+corpus stage"),
    "tinyplm paradigm-table docs/results/paradigm_runs --out runs/paradigm_table": Way(
        "test_paradigm_table_of_the_recorded_runs", "as written: the paradigm runs docs/results/paradigm_runs "
        "records (their results.json files), read through the world's link to docs/"),
    "tinyplm run recipes/glue/sst2_base.yaml": Way(
        None, "cheap check only: fetches all-mpnet-base-v2 (438 MB) and runs an hour; tests/run/test_token_ids.py "
        "distils across tokenizers and tests/compress/test_family_contract.py runs every stage on a tiny MPNet"),
    "tinyplm run recipes/glue/mrpc_base.yaml": Way(
        None, "cheap check only: fetches all-mpnet-base-v2 (438 MB) and runs half an hour; tests/run/"
        "test_logits_from.py runs a tiny recipe whose students learn the logits of the teacher's runtime stage"),
    "tinyplm run recipes/conll/ner_base.yaml": Way(
        None, "cheap check only: fetches all-mpnet-base-v2 (438 MB) and runs about an hour; "
        "tests/test_span_token_runs.py runs a tagger across tokenizers and the runtime step on a tiny CoNLL"),
    "tinyplm run recipes/squad/v1_base.yaml": Way(
        None, "cheap check only: fetches all-mpnet-base-v2 (438 MB) and runs about two hours; "
        "tests/test_span_token_runs.py runs SQuAD with held-out articles choosing, and the runtime step, on tiny data"),
    "tinyplm run recipes/embed/minilm_embed.yaml": Way(
        None, "cheap check only: about 20 minutes on the packaged MiniLM and the shared corpus; "
        "tests/run/test_embedding_run.py and tests/run/test_static_embedding_run.py run the embedding task end to "
        "end on tiny sentence models (layer and cross-tokenizer students, pruning, trimming, int8, static)"),
    "tinyplm run recipes/embed/mpnet_embed.yaml": Way(
        None, "cheap check only: fetches all-mpnet-base-v2 (438 MB) and runs about an hour; "
        "tests/run/test_embedding_run.py distils a tiny sentence model across tokenizers through a fitted projection"),
    "tinyplm run recipes/embed/mpnet_embed.yaml task.pair_questions=true": Way(
        None, "cheap check only: the recipe with each question beside its passage (about 80 minutes); "
        "tests/tasks/test_embedding_task.py pairs questions with their paragraphs and tests/train/test_loop.py "
        "keeps each unit in one batch"),
    "python benchmarks/embed_static_vs_model2vec.py runs/minilm_embed --threads 2": Way(
        None, "cheap check only: scores the run's teacher, static student and Model2Vec on STS-B and SQuAD "
        "(minutes); tests/run/test_static_embedding_run.py runs the script on a tiny run"),
    "python benchmarks/embed_static_vs_model2vec.py runs/mpnet_embed --threads 2": Way(
        None, "cheap check only: the same script on the MPNet run (about 15 minutes: the teacher scored on "
        "SQuAD); tests/run/test_static_embedding_run.py runs the script on a tiny run"),
    "tinyplm run recipes/glue/sst2_pareto.yaml": Way(
        "test_sst2_pareto_run", "the shipped recipe shrunk like the MRPC run", add=TINY_GLUE_RUN),
    "tinyplm sweep recipes/glue/sst2_pareto_variant.yaml --space sweeps/sst2_compress.yaml --max-concurrent 2": Way(
        None, "cheap check only: 23 trials on Ray, 42 minutes, after the line before; tests/sweep/test_space.py "
        "validates every trial's recipe and tests/sweep/test_ray_sweep.py runs a sweep of tiny trials on Ray"),
    "python benchmarks/compress_pareto.py --task sst2 --teacher runs/sst2_pareto/teacher": Way(
        None, "cheap check only: the run behind docs/results/compress-pareto.md's SST-2 table (53 minutes); "
        "tests/test_benchmarks.py tests the script's parts"),
    "tinyplm sweep recipes/glue/sst2_demo.yaml --space sweeps/sst2_student_optuna.yaml --max-concurrent 2": Way(
        None, "cheap check only: 12 trials of the demo's student on Ray; tests/sweep/test_ray_sweep.py runs a "
        "sweep of tiny trials on a real Ray head (a worker killed, then --resume)"),
    "tinyplm sweep recipes/glue/sst2_demo.yaml --space sweeps/sst2_student_optuna.yaml --address HEAD_IP:6379 "
    "--max-concurrent 8": Way(
        None, "cheap check only: needs a Ray cluster; tests/sweep/test_ray_sweep.py runs tinyplm sweep --address "
        "against a head started with ray start --head"),
    "tinyplm predict runs/sst2_demo/model -i 'reviews/part-*.tsv' -o predictions/ --ray --workers 2": Way(
        None, "cheap check only: needs the demo run and Ray; tests/predict/test_predict_ray.py runs predict --ray "
        "over 8 shards (and with an actor killed) and compares it with plain predict"),
    "python benchmarks/openvino_forms.py runs/sst2_demo": Way(
        None, "cheap check only: four OpenVINO forms of the demo's student timed beside the teacher, minutes; "
        "tests/test_openvino_forms_bench.py checks its four forms, tests/compress/test_openvino.py the "
        "int8-stored weights"),
    "python benchmarks/student_shapes.py --task sst2 --threads 2 --shape L3=3,12,768 --shape L3-pruned=3,9,512 "
    "--shape L3-h6-f384=3,6,384 --shape L3-w256=3,8,512,256 --shape L2-f384=2,12,384 --shape L2-h6-f384=2,6,384": Way(
        None, "cheap check only: random-weight shapes timed beside the teacher on SST-2 dev, minutes; "
        "tests/test_student_shapes_bench.py runs the script on a tiny teacher and tiny data"),
    "python benchmarks/train_step.py runs/sst2_demo/teacher runs/sst2_demo/students/student-L3": Way(
        "test_demo_run_benchmarks", "as written, on the tiny demo run, 2 steps a round, its own --out",
        add=("--steps", "2", "--rounds", "1", "--batch-size", "8", "--out", "runs/train_step.json")),
    "python benchmarks/predict_ray.py runs/sst2_demo/model": Way(
        None, "cheap check only: needs the demo run and Ray, minutes; tests/test_predict_ray_bench.py checks its "
        "corpus and figures, tests/predict/test_predict_ray.py the labels of predict --ray against plain predict"),
    "python benchmarks/predict_ray.py runs/sst2_demo/students/student-L3.runtime --workers 1 --threads 2": Way(
        None, "cheap check only: as the line above, one actor of two threads"),
    "python benchmarks/predict_ray.py runs/sst2_demo/students/student-L3.runtime --workers 1 --threads 2 "
    "--cluster": Way(None, "cheap check only: as the line above, on a Ray head started before the rounds; "
                     "tests/test_predict_ray_bench.py checks that each round joins it"),
    "python benchmarks/predict_ray.py runs/sst2_demo/students/student-L3.runtime --workers 1 --threads 2 "
    "--repeat 80 --rounds 2": Way(None, "cheap check only: as the line above, on 69,760 sentences"),
    "python benchmarks/predict_ray.py runs/sst2_demo/students/student-L3.runtime --workers 1 --threads 2 "
    "--repeat 80 --rounds 2 --cluster": Way(None, "cheap check only: as the line above, on a Ray head started "
                                             "before the rounds"),
    "tinyplm run recipes/glue/sst2_demo_students.yaml": Way(
        None, "cheap check only: three students of the demo beside each other (55 minutes); "
        "tests/test_recipes_cli.py validates the recipe, and the demo's own run tests cover its steps"),
    "tinyplm run recipes/glue/sst2_static.yaml": Way(
        None, "cheap check only: reads the demo run's teacher; tests/run/test_classic_static_run.py runs "
        "static students in a tiny run, tests/test_recipes_cli.py validates the recipe with a tiny teacher"),
    "python benchmarks/pareto.py --if-finished --rounds 3": Way(
        None, "cheap check only: needs the demo and static runs and model2vec[distill], minutes; "
        "tests/test_pareto_bench.py runs it on a tiny run beside a fake peer"),
    "python benchmarks/pareto.py --recipes --if-finished --runs runs/sst2_demo runs/sst2_static "
    "--rounds 3 --fresh": Way(
        None, "cheap check only: reads finished runs as they are, needs model2vec[distill], minutes; "
        "tests/test_pareto_bench.py runs it on a tiny run beside a fake peer"),
    "python benchmarks/serve_agreement.py runs/sst2_demo": Way(
        None, "cheap check only: starts a server per stage of the demo run; tests/serve/test_serve_agreement.py "
        "runs it on a tiny run of two stages"),
}


# --------------------------------------------------------------------------- reading README.md and docs/


def doc_files() -> list[Path]:
    """README.md, then every page of the docs/ site (docs/**/*.md), in path order."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def documented_lines() -> dict[str, list[str]]:
    """Each command line of README.md and docs/, in order of first appearance -> the files (relative to
    the repository) that show it."""
    shown: dict[str, list[str]] = {}
    for line, places in shown_lines().items():
        shown[line] = list(dict.fromkeys(p.file for p in places))
    return shown


@dataclass(frozen=True)
class Shown:
    """One place a command line is shown: its file, whether in a ```bash block (else an inline code
    span), and the reason after its ``# long:`` marker (None: not marked)."""

    file: str
    block: bool
    long: str | None


def shown_lines() -> dict[str, list[Shown]]:
    """Each command line of README.md and docs/, in order of first appearance -> every place showing it."""
    shown: dict[str, list[Shown]] = {}
    for path in doc_files():
        for line, block, long in commands_in(path.read_text(encoding="utf-8")):
            shown.setdefault(line, []).append(Shown(str(path.relative_to(REPO)), block, long))
    return shown


#: The marker of a long command: a ```bash line's comment that starts with ``long:``.
LONG = re.compile(r"(?:^|\s)#\s*long:\s*(.*)$")


def commands_in(text: str) -> list[tuple[str, bool, str | None]]:
    """(line, in a ```bash block, long-marker reason or None) for each command of one Markdown text, in
    order: lines of ```bash blocks (trailing ``# comments`` and spaces stripped), then inline code spans
    outside fenced blocks, that start with ``tinyplm `` or ``python benchmarks/`` or launch
    ``-m tinyplm.cli``."""
    fence = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
    found: list[tuple[str, bool, str | None]] = []
    for match in fence.finditer(text):
        if match.group(1) == "bash":
            for raw in match.group(2).splitlines():
                marker = LONG.search(raw)
                found.append((_strip_comment(raw), True, marker.group(1).strip() if marker else None))
    prose = fence.sub("", text)
    found += [(span, False, None) for span in re.findall(r"(?<!`)`([^`\n]+)`(?!`)", prose)]
    return [c for c in found if c[0].startswith(PROGRAMS) or " -m tinyplm.cli " in f"{c[0]} "]


def readme_lines(text: str | None = None) -> list[str]:
    """The command lines of one Markdown text (README.md by default), in order, once each (see
    :func:`commands_in`)."""
    text = README.read_text(encoding="utf-8") if text is None else text
    return list(dict.fromkeys(line for line, _, _ in commands_in(text)))


def _strip_comment(line: str) -> str:
    """``cmd args   # comment`` -> ``cmd args`` (a ``#`` inside a word is kept)."""
    return re.sub(r"(^|\s+)#.*$", "", line).strip()


def program_args(line: str) -> list[str]:
    """The arguments of a line's program: a benchmark script's, or ``tinyplm``'s (see :func:`tinyplm_args`)."""
    words = shlex.split(line)
    return words[2:] if words[0] == "python" else tinyplm_args(line)


def tinyplm_args(line: str) -> list[str]:
    """The arguments after ``tinyplm`` (or after ``-m tinyplm.cli`` on an accelerate line)."""
    words = shlex.split(line)
    if words[0] == "tinyplm":
        return words[1:]
    at = words.index("-m")
    assert words[at + 1] == "tinyplm.cli", line
    return words[at + 2:]


def options_in(words: list[str]) -> set[str]:
    """The options (``--flag``, ``-x``, ``--flag=value`` -> ``--flag``) among ``words``."""
    return {w.split("=", 1)[0] for w in words if re.match(r"^--?[A-Za-z]", w)}


def test_readme_parser_finds_blocks_spans_and_launches() -> None:
    text = ("```bash\nmake demo  # no\ntinyplm tasks   # tasks\nsource x\naccelerate launch --cpu -m tinyplm.cli "
            "run r.yaml\n```\nSee `tinyplm report RUN_DIR` and `python benchmarks/b.py --x 1`, not `tinyplm.models`.\n"
            "```yaml\nteacher: {model: m}   # after `tinyplm fit-mlm-head`\n```\n")
    assert readme_lines(text) == ["tinyplm tasks", "accelerate launch --cpu -m tinyplm.cli run r.yaml",
                                  "tinyplm report RUN_DIR", "python benchmarks/b.py --x 1"]
    assert _strip_comment("tinyplm run a.yaml x=1#2   # comment") == "tinyplm run a.yaml x=1#2"
    marked = "```bash\ntinyplm run a.yaml   # long: an hour, on MiniLM\ntinyplm run b.yaml  # longer than this\n```\n"
    assert commands_in(marked) == [("tinyplm run a.yaml", True, "an hour, on MiniLM"),
                                   ("tinyplm run b.yaml", True, None)]


def test_readme_and_docs_have_command_lines() -> None:
    assert any(line.startswith("tinyplm ") for line in readme_lines()), "no tinyplm command found in README.md"
    pages = doc_files()[1:]
    assert pages, f"no Markdown pages under {DOCS}"
    lines = documented_lines()
    assert any("docs/" in f for files in lines.values() for f in files), "no command line found in docs/"
    assert all("#" not in line.split()[-1] for line in lines)


def test_table_and_docs_agree() -> None:
    shown = documented_lines()
    missing = [f"{line}    ({', '.join(shown[line])})" for line in shown if line not in DOC_LINES]
    stale = [line for line in DOC_LINES if line not in shown]
    assert not missing, ("README.md or docs/ show command lines that tests/test_readme_commands.py does not know; "
                         "add each to DOC_LINES with how it is exercised:\n" + "\n".join(missing))
    assert not stale, ("DOC_LINES holds lines that neither README.md nor docs/ show any more; remove or update "
                       "them:\n" + "\n".join(stale))


def unmarked_lines() -> list[str]:
    """What breaks the rule of the module docstring, one line per problem."""
    problems = []
    for line, places in shown_lines().items():
        way = DOC_LINES[line]
        marked = [p.file for p in places if p.long is not None]
        blocks = [p for p in places if p.block]
        if way.test:
            if marked:
                problems.append(f"{line!r} runs here ({way.test}) but is marked long in {marked}: drop the marker")
            continue
        if not blocks:
            problems.append(f"{line!r} does not run here and is shown only in prose: show it in a ```bash block "
                            "with a '# long: why' comment, or run it here")
        unmarked = [p.file for p in blocks if p.long is None]
        problems += [f"{line!r} does not run here and is not marked long in {f} ('# long: why')" for f in unmarked]
    return problems


def test_each_line_runs_here_or_is_marked_long() -> None:
    problems = unmarked_lines()
    assert not problems, "\n".join(problems)


def test_readme_opens_with_the_two_commands() -> None:
    """The front door: the title, then one block with `make demo` and `make test`, in that order."""
    lines = README.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# ") and lines[1:3] == ["", "```bash"], \
        "README.md must open with its command block, right under the title"
    block = lines[3:lines.index("```", 3)]
    assert [line.split()[:2] for line in block] == [["make", "demo"], ["make", "test"]], block


def test_readme_links_resolve() -> None:
    """Every relative link of README.md (into docs/, mostly) names a file that exists."""
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    assert any(t.startswith("docs/") for t in targets), "README.md links nowhere into docs/"
    broken = [t for t in targets if "://" not in t and not (REPO / t.split("#", 1)[0]).exists()]
    assert not broken, f"README.md links to files that do not exist: {broken}"


def first_table(text: str, after: str = "") -> list[str]:
    """The rows of the first markdown table in ``text`` after the first occurrence of ``after``."""
    rows: list[str] = []
    for line in text[text.index(after):].splitlines():
        if line.startswith(("| ", "|:")):
            rows.append(line)
        elif rows:
            break
    return rows


def test_readme_demo_table_is_the_results_table() -> None:
    """The headline table in README.md is, row for row, the first one docs/results/demo.md keeps
    (later tables there are other runs)."""
    readme = first_table(README.read_text(encoding="utf-8"))
    results = first_table((DOCS / "results" / "demo.md").read_text(encoding="utf-8"))
    assert readme and readme == results, "README.md's demo table differs from docs/results/demo.md's"


def test_every_real_run_names_a_test_here() -> None:
    here = sys.modules[__name__]
    for line, way in DOC_LINES.items():
        assert way.why, line
        if way.test is not None:
            assert callable(getattr(here, way.test, None)), f"{line!r}: no test named {way.test} in this file"
        else:
            assert not way.replace and not way.add, f"{line!r}: substitutions but no test runs it"


@pytest.mark.parametrize("line", [line for line, way in DOC_LINES.items() if way.test])
def test_substitutions_keep_the_command_and_its_options(line: str) -> None:
    """A real run is the documented command: same subcommand, every option of the line still there,
    and each replaced token really is in the line."""
    way = DOC_LINES[line]
    readme = program_args(line)
    used = argv(line, World.placeholder())
    if not line.startswith("python "):
        assert used[:len(_subcommand(readme))] == _subcommand(readme)
    assert options_in(readme) <= options_in(used)
    for token in way.replace:
        assert token in readme, f"{line!r}: replaces {token!r}, which the line does not hold"


# --------------------------------------------------------------------------- the cheap check


def _click_group():
    import typer

    from tinyplm.cli import app

    return typer.main.get_command(app)


def _subcommand(args: list[str]) -> list[str]:
    """The subcommand words at the start of ``args`` (``["tokenizer", "train"]`` or ``["run"]``)."""
    return args[:2] if args and args[0] == "tokenizer" else args[:1]


def _resolve(args: list[str]):
    """(click command, its name, the remaining arguments) for ``tinyplm ARGS``."""
    command, path = _click_group(), []
    while hasattr(command, "commands") and args and not args[0].startswith("-"):
        name, args = args[0], args[1:]
        assert name in command.commands, f"no subcommand '{' '.join([*path, name])}'; have {sorted(command.commands)}"
        command, path = command.commands[name], [*path, name]
    assert not hasattr(command, "commands"), f"'tinyplm {' '.join(path)}' is a group, not a command"
    return command, " ".join(path), args


@pytest.mark.parametrize("line", list(documented_lines()))
def test_readme_line_parses(line: str) -> None:
    """The cheap check, for every line of README.md and docs/: the command exists and accepts the line."""
    if line.startswith("python benchmarks/"):
        _check_benchmark_line(line)
        return
    if line.startswith("accelerate "):
        _check_accelerate_options(line)
    args = tinyplm_args(line)
    command, name, rest = _resolve(args)
    accepted = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts) if opt.startswith("-")}
    unknown = options_in(rest) - accepted
    assert not unknown, f"{line!r}: 'tinyplm {name}' does not accept {sorted(unknown)}; it has {sorted(accepted)}"
    if not rest and any(p.required for p in command.params):
        return  # the subcommand named in prose (`tinyplm report` ...), not a command line: it exists
    try:
        ctx = command.make_context(name, list(rest))
    except Exception as exc:  # typer's vendored click raises its own UsageError
        pytest.fail(f"{line!r}: 'tinyplm {name}' rejects the arguments: {exc}")
    _check_recipe(line, name, ctx.params)


def _check_recipe(line: str, name: str, params: dict) -> None:
    """A line that names a recipe: the file is shipped and loads with the line's overrides."""
    if name not in ("run", "validate", "pretrain"):
        return
    from tinyplm.config import load_recipe
    from tinyplm.config.load import is_pretrain_recipe
    from tinyplm.config.pretrain import PretrainRecipe
    from tinyplm.errors import TinyplmError

    recipe = REPO / params["recipe"]
    assert recipe.is_file(), f"{line!r}: no recipe {params['recipe']} in the repository"
    pretrain = is_pretrain_recipe(recipe)
    assert pretrain == (name == "pretrain"), f"{line!r}: {params['recipe']} is not a recipe for 'tinyplm {name}'"
    try:
        load_recipe(recipe, params.get("overrides"), **({"schema": PretrainRecipe} if pretrain else {}))
    except TinyplmError as exc:
        pytest.fail(f"{line!r}: the recipe does not load with the line's overrides: {exc}")


def _check_benchmark_line(line: str) -> None:
    words = shlex.split(line)
    script = REPO / words[1]
    assert script.is_file(), f"{line!r}: no {words[1]} in the repository"
    shown = run_script(script, ["--help"], REPO, {})
    assert shown.returncode == 0, f"{line!r}: --help exits {shown.returncode}\n{shown.output[-2000:]}"
    accepted = set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", shown.stdout))
    unknown = options_in(words[2:]) - accepted
    assert not unknown, f"{line!r}: {words[1]} --help does not list {sorted(unknown)}"


def _check_accelerate_options(line: str) -> None:
    words = shlex.split(line)
    # read by the parser `accelerate launch` reads its arguments with, in this process: the launcher's
    # `--help` in a new process spent most of its seconds importing torch (and the help accelerate
    # formats inside pytest leaves options out, so the line is parsed, not looked up in it)
    from accelerate.commands.launch import launch_command_parser

    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            parsed = launch_command_parser().parse_args(words[2:])
    except SystemExit:
        pytest.fail(f"{line!r}: accelerate launch refuses it: {said.getvalue().strip()[-500:]}")
    assert parsed.module and [parsed.training_script, *parsed.training_script_args] == words[words.index("-m") + 1:]


# --------------------------------------------------------------------------- the tiny world


def argv(line: str, world: World) -> list[str]:
    """The arguments a real run of documented line ``line`` gives its program (its :class:`Way`'s
    substitutions applied)."""
    way = DOC_LINES[line]
    words = [way.replace[w].format(**world.names) if w in way.replace else w for w in program_args(line)]
    return words + [a.format(**world.names) for a in way.add]


def run_line(line: str, world: World) -> Result:
    """Run documented line ``line`` (with its substitutions) in the world, in this process."""
    program = shlex.split(line)[:2] if line.startswith("python ") else ["tinyplm"]
    return run_program([*program, *argv(line, world)], world)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    return make_world(tmp_path_factory.mktemp("readme"))


@pytest.fixture(scope="module")
def demo_run(world: World) -> Path:
    """runs/sst2_demo: the demo recipe run for real, shrunk (its documented line, TINY_DEMO)."""
    stdout = ok(run_line("tinyplm run recipes/glue/sst2_demo.yaml", world))
    assert "report:" in stdout
    return world.cwd / "runs" / "sst2_demo"


def _yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _results(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- real runs


def test_tasks_as_written(tmp_path: Path) -> None:
    from tinyplm import tasks

    stdout = ok(cli(tinyplm_args("tinyplm tasks"), cwd=REPO, env={"TINYPLM_CACHE": str(tmp_path)}))
    missing = [name for name in tasks.names() if name not in stdout]
    assert not missing, f"'tinyplm tasks' does not list {missing}:\n{stdout}"


@pytest.mark.integration
def test_validate_mrpc_demo_as_written(shared_data: Path, tmp_path: Path) -> None:
    if not (shared_data / "glue" / "MRPC").is_dir():
        pytest.skip(f"MRPC not found in {shared_data / 'glue'}")
    line = "tinyplm validate recipes/glue/mrpc_demo.yaml"
    stdout = ok(cli(tinyplm_args(line), cwd=REPO, env={"TINYPLM_DATA": str(shared_data),
                                                      "TINYPLM_CACHE": str(tmp_path)}))
    assert "recipes/glue/mrpc_demo.yaml: ok (task mrpc" in stdout.replace("\n", "")


@pytest.mark.slow
def test_mrpc_demo_run_then_resume(world: World) -> None:
    run_dir = world.cwd / "runs" / "mrpc_demo"  # the recipe's output_dir, runs/{name}
    stdout = ok(run_line("tinyplm run recipes/glue/mrpc_demo.yaml", world))
    assert "report:" in stdout
    for name in ("config.resolved.yaml", "results.json", "summary.md", "report.html", "model/config.json",
                 "teacher/config.json", "students/student-L3-H384/config.json", "logs/train.jsonl"):
        assert (run_dir / name).is_file(), f"{run_dir} lacks {name}"
    results = _results(run_dir)
    assert [s["name"] for s in results["stages"]] == ["teacher", "student-L3-H384"]
    assert all({"f1", "accuracy"} <= set(s["metrics"]) for s in results["stages"])
    assert _yaml(run_dir / "config.resolved.yaml")["teacher"]["model"] == world.names["teacher"]

    before = (run_dir / "results.json").read_bytes()
    resumed = run_line("tinyplm run recipes/glue/mrpc_demo.yaml --resume", world)
    assert resumed.returncode == 2 and "Traceback" not in resumed.output, resumed.output[-3000:]
    said = resumed.stderr
    assert "holds a finished run (results.json): nothing to resume" in said and "runs/mrpc_demo" in said, said
    assert (run_dir / "results.json").read_bytes() == before


@pytest.mark.slow
def test_mrpc_demo_run_with_the_readme_overrides(world: World) -> None:
    line = "tinyplm run recipes/glue/mrpc_demo.yaml teacher.finetune.budget_minutes=2 students.*.train.lr=5e-5"
    ok(run_line(line, world))
    run_dir = world.cwd / "runs" / "mrpc_overrides"
    resolved = _yaml(run_dir / "config.resolved.yaml")
    assert resolved["teacher"]["finetune"]["budget_minutes"] == 2
    assert [s["train"]["lr"] for s in resolved["students"]] == [5e-5]
    assert (run_dir / "results.json").is_file() and (run_dir / "report.html").is_file()


@pytest.mark.slow
def test_rte_flow(world: World) -> None:
    """finetune -> distill -> evaluate -> bench -> report -> export, each on the previous one's files."""
    runs = world.cwd / "runs"
    ok(run_line("tinyplm finetune --task rte --model minilm-l6 --out runs/rte-teacher --budget-minutes 5", world))
    assert (runs / "rte-teacher" / "teacher" / "config.json").is_file()
    resolved = _yaml(runs / "rte-teacher" / "config.resolved.yaml")
    assert resolved["task"]["name"] == "rte" and resolved["teacher"]["finetune"]["budget_minutes"] == 5

    ok(run_line("tinyplm distill --teacher runs/rte-teacher/teacher --task rte --teacher-layers 1,3,5 "
                "--out runs/rte-l3", world))
    student = json.loads((runs / "rte-l3" / "model" / "config.json").read_text())
    assert student["num_hidden_layers"] == 3  # --teacher-layers 1,3,5
    distilled = {s["name"]: s["metrics"]["accuracy"] for s in _results(runs / "rte-l3")["stages"]}
    final = _results(runs / "rte-l3")["info"]["final_model"]
    assert list(distilled)[0] == "teacher" and final in distilled

    # the saved model/ scores what the run measured
    stdout = ok(run_line("tinyplm evaluate runs/rte-l3/model --task rte", world))
    accuracy = float(re.search(r"^accuracy: ([0-9.]+)$", stdout, re.M).group(1))
    assert accuracy == pytest.approx(distilled[final], abs=1e-4)

    ok(run_line("tinyplm bench runs/rte-teacher/teacher runs/rte-l3/model --task rte --out runs/rte-bench", world))
    bench = _results(runs / "rte-bench")
    assert [s["metrics"]["accuracy"] for s in bench["stages"]] == pytest.approx(
        [_results(runs / "rte-teacher")["stages"][0]["metrics"]["accuracy"], distilled[final]])
    assert all(s["latency_ms_p50_b1"] > 0 and s["throughput_sent_per_s"] > 0 for s in bench["stages"])
    assert (runs / "rte-bench" / "report.html").is_file()

    for name in ("summary.md", "report.html"):
        (runs / "rte-l3" / name).unlink()
    ok(run_line("tinyplm report runs/rte-l3", world))
    assert (runs / "rte-l3" / "summary.md").is_file() and (runs / "rte-l3" / "report.html").is_file()

    ok(run_line("tinyplm export RUN_DIR --onnx", world))  # exit 0: every stage agrees on >= 99.5%
    parity = json.loads((runs / "rte-l3" / "export" / "parity.json").read_text())
    assert [p["stage"] for p in parity] == list(distilled)
    assert all(p["examples"] == 16 and p["agreement"] >= 0.995 for p in parity), parity  # 16 tiny dev examples
    assert all(list((runs / "rte-l3" / "export" / p["stage"]).rglob("*.onnx")) for p in parity)

    stdout = ok(run_line("tinyplm bench A B --task T --runtimes torch,onnxruntime,openvino", world))
    timed = {s["name"] for s in _results(runs / "rte-runtimes")["stages"]}
    assert {f"{m}@{r}" for m in ("teacher", "model") for r in ("onnxruntime", "openvino")} <= timed, timed
    assert stdout.count("fastest within") == 2  # one verdict per model


@pytest.mark.slow
def test_accelerate_launch_runs_two_processes(world: World) -> None:
    line = "accelerate launch --multi_gpu --num_processes 2 -m tinyplm.cli run recipes/glue/rte_demo.yaml"
    launcher = Path(sys.executable).with_name("accelerate")
    if not launcher.exists():
        pytest.skip(f"accelerate launcher not installed next to {sys.executable}")
    words = shlex.split(line)
    at = words.index("-m")
    with socket.socket() as sock:  # a free port, so a run beside this one cannot clash on the default 29500
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [str(launcher), *words[1:at], "--main_process_port", str(port), "-m", "tinyplm.cli", *argv(line, world)]
    env = {**os.environ, **world.env, "TINYPLM_CACHE": str(world.cwd / ".tinyplm-cache"), "OMP_NUM_THREADS": "1",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(command, cwd=world.cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    results = _results(world.cwd / "runs" / "rte_demo")  # the recipe's output_dir, runs/{name}
    assert results["info"]["processes"] == 2
    assert [s["name"] for s in results["stages"]] == ["teacher", "student-L3-H384"]
    assert proc.stdout.count("report: ") == 1  # only the main process prints
    # line starts: on a CPU without VNNI the int8 note ("... on this CPU: it has no VNNI") says "CPU: " too
    lines = proc.stdout.splitlines()
    assert sum(line.startswith("CPU: ") for line in lines) == 1
    assert sum(line.startswith("measured on: ") for line in lines) == 1
    # the note follows each of the two where int8 gains little, and only there
    cpu = next(line for line in lines if line.startswith("CPU: "))
    assert sum(line.startswith("note: int8 gains little") for line in lines) == (2 if "no VNNI" in cpu else 0)


@pytest.mark.slow
def test_squad_flow(world: World) -> None:
    """The SQuAD recipe run, then evaluate writes preds.json, then evaluate-squad scores it the same."""
    ok(run_line("tinyplm run recipes/squad/v1_demo.yaml", world))
    assert (world.cwd / "runs" / "squad_v1_demo" / "model" / "config.json").is_file()
    stdout = ok(run_line("tinyplm evaluate runs/squad_v1_demo/model --task squad --max-length 256 "
                         "--predictions preds.json", world))
    printed = dict(re.findall(r"^(\w+): ([0-9.]+)$", stdout, re.M))
    preds = json.loads((world.cwd / "preds.json").read_text())
    dev = json.loads((world.data / "squad" / "dev-v1.1.json").read_text())
    ids = {qa["id"] for article in dev["data"] for p in article["paragraphs"] for qa in p["qas"]}
    assert set(preds) == ids

    scores = json.loads(ok(run_line("tinyplm evaluate-squad preds.json ../shared/data/squad/dev-v1.1.json", world)))
    assert scores["f1"] == pytest.approx(float(printed["f1"]), abs=1e-3)
    assert scores["exact_match"] == pytest.approx(float(printed["exact_match"]), abs=1e-3)


@pytest.mark.slow
def test_conll_demo_run(world: World) -> None:
    ok(run_line("tinyplm run recipes/conll/ner_demo.yaml", world))
    results = _results(world.cwd / "runs" / "conll_ner_demo")
    assert all({"f1", "f1_test"} <= set(s["metrics"]) for s in results["stages"])


@pytest.mark.slow
def test_pretrain_flow(world: World) -> None:
    """tokenizer train -> pretrain mlm_small.yaml (reads runs/tok16k) -> pretrain continue_minilm.yaml."""
    stdout = ok(run_line("tinyplm tokenizer train ../shared/data/corpus --kind wordpiece --vocab-size 16000 "
                         "--out runs/tok16k", world))
    assert "wordpiece tokenizer" in stdout and (world.cwd / "runs" / "tok16k" / "tokenizer.json").is_file()

    from transformers import AutoTokenizer

    vocab = {"mlm-small": len(AutoTokenizer.from_pretrained(str(world.cwd / "runs" / "tok16k"))),
             "minilm-books": len(tiny_vocab())}  # from scratch on runs/tok16k; continued from the tiny model
    for line, name in (("tinyplm pretrain recipes/pretrain/mlm_small.yaml", "mlm-small"),
                       ("tinyplm pretrain recipes/pretrain/continue_minilm.yaml", "minilm-books")):
        stdout = ok(run_line(line, world))
        run_dir = world.cwd / "runs" / name  # the recipe's output_dir, runs/{name}
        assert f"{run_dir.relative_to(world.cwd) / 'pretrain.json'}" in stdout.replace("\n", "")
        record = json.loads((run_dir / "pretrain.json").read_text())
        assert 1 <= record["steps"] <= 2, record  # train.max_steps=2, or the recipe's one epoch first
        assert {"mlm_loss", "mlm_accuracy", "unigram_loss", "pseudo_perplexity"} <= set(record["after"]), record
        assert record["before"]["mlm_loss"] > 0
        assert json.loads((run_dir / "model" / "config.json").read_text())["vocab_size"] == vocab[name]


@pytest.mark.slow
def test_fit_mlm_head_then_augment(world: World) -> None:
    stdout = ok(run_line("tinyplm fit-mlm-head minilm-l6 --out runs/minilm-mlm --steps 500", world))
    assert "model with MLM head" in stdout and (world.cwd / "runs" / "minilm-mlm" / "config.json").is_file()

    ok(run_line("tinyplm augment TASK --mlm DIR --out FILE.jsonl", world))
    rows = [json.loads(line) for line in (world.cwd / "runs" / "rte-aug.jsonl").read_text().splitlines()]
    train = [line.split("\t")[1] for line in (world.data / "glue" / "RTE" / "train.tsv").read_text().splitlines()[1:]]
    assert len(rows) == len(train) * (1 + 2)  # the originals, then --copies 2 of each
    assert [r["text"] for r in rows[:len(train)]] == train
    assert all(r["text"] and r["text_pair"] and r["label"] in (0, 1) for r in rows)


@pytest.mark.slow
def test_predict_line(world: World, demo_run: Path) -> None:
    """predict on the demo run: one record per line of reviews.txt, in order, at the run's max length."""
    reviews = [sentence(random.Random(i), i % 2) for i in range(20)]
    (world.cwd / "reviews.txt").write_text("\n".join(reviews) + "\n", encoding="utf-8")
    result = run_line("tinyplm predict runs/sst2_demo --input reviews.txt --output predictions.jsonl", world)
    ok(result)
    preds = [json.loads(x) for x in (world.cwd / "predictions.jsonl").read_text().splitlines()]
    assert [p["line"] for p in preds] == list(range(1, 21)) and all(p["label"] in p["scores"] for p in preds)
    assert "max length 64" in result.stderr  # the demo recipe's task.max_length


def test_embed_eval_lines(world: World) -> None:
    """embed-eval on the standard sets (the tiny world's STS-B and SQuAD dev), then on your own pairs file and
    BEIR folder with the scores written: every set named, its size that of its files."""
    table = ok(run_line("tinyplm embed-eval minilm-l6", world))
    assert "stsb" in table and "squad" in table and "spearman" in table and "ndcg_at_10" in table
    rng = random.Random(3)
    rows = ["sentence1,sentence2,score"] + [f"{sentence(rng, 1)},{sentence(rng, 0)},{i % 5}" for i in range(12)]
    (world.cwd / "my_pairs.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    beir = world.cwd / "my_retrieval_set"
    (beir / "qrels").mkdir(parents=True, exist_ok=True)
    (beir / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "text": sentence(rng, i % 2)}) + "\n"
                                               for i in range(8)), encoding="utf-8")
    (beir / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": sentence(rng, i % 2)}) + "\n"
                                                for i in range(4)), encoding="utf-8")
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n"
                                                                                     for i in range(4)),
                                             encoding="utf-8")
    ok(run_line("tinyplm embed-eval minilm-l6 --no-squad --pairs my_pairs.csv --beir my_retrieval_set "
                "--out scores.json", world))
    scores = json.loads((world.cwd / "scores.json").read_text(encoding="utf-8"))
    assert [(s["name"], s["size"]) for s in scores["sets"]] == [
        ("stsb", {"pairs": 16}), ("my_pairs", {"pairs": 12}), ("my_retrieval_set", {"queries": 4, "documents": 8})]


@pytest.mark.slow
def test_warm_shapes_line(world: World, demo_run: Path) -> None:
    """warm_shapes on the demo run's model: both copies timed in every round, the batch-1 copy warmed on
    fewer shapes than the copy warmed at every batch; the JSON's path is the last line."""
    stdout = ok(run_line("python benchmarks/warm_shapes.py runs/sst2_demo/model", world))
    result = json.loads(Path(stdout.strip().splitlines()[-1]).read_text(encoding="utf-8"))
    assert result["shapes_warmed"]["batch_1_only"] < result["shapes_warmed"]["every_batch"]
    assert all(len(v) == 2 and min(v) > 0 for v in result["ms_per_pass_rounds"].values())
    assert 0 < result["sentences"] <= 20  # the tiny world's dev split may hold fewer


def test_predict_vectors_line(world: World) -> None:
    """predict on an embedding model to .npy: one float32 row per input line, the ids beside it."""
    import numpy as np

    lines = [sentence(random.Random(i), i % 2) for i in range(7)]
    (world.cwd / "sentences.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    ok(run_line("tinyplm predict my-sentence-model/ --input sentences.txt --output vectors.npy", world))
    vectors = np.load(world.cwd / "vectors.npy")
    assert vectors.shape == (7, 32) and vectors.dtype == np.float32
    ids = json.loads((world.cwd / "vectors.ids.json").read_text(encoding="utf-8"))
    assert [i["line"] for i in ids] == list(range(1, 8))


def test_world_is_laid_out_like_the_repository(world: World) -> None:
    """The tiny world's data is where the docs' relative paths look (and TINYPLM_DATA says)."""
    assert os.path.samefile(world.cwd / ".." / "shared" / "data", world.data)
    from tinyplm import tasks

    for name in ("sst2", "rte", "mrpc", "squad", "conll2003"):
        assert all(tasks.get(name, str(world.data)).data_present().values()), name


def test_subcommands_named_in_prose(world: World) -> None:
    for line in ("tinyplm validate", "tinyplm report", "tinyplm embed-eval", "tinyplm run", "tinyplm evaluate",
                 "tinyplm bench"):
        assert "Usage:" in ok(run_line(line, world)), line


@pytest.mark.slow
def test_sst2_demo_run(demo_run: Path) -> None:
    """The demo recipe, shrunk: every stage of the recipe measured, model/ chosen on the held-out sentences."""
    results = _results(demo_run)
    assert [s["name"] for s in results["stages"]] == [
        "teacher", "teacher-best.runtime", "student-L3", "student-L3.prune_heads", "student-L3.prune_ffn",
        "student-L3.trim_vocab", "student-L3.runtime"]
    info = results["info"]
    assert info["holdout"] == 8 and info["selection_metric"] == "accuracy_holdout"
    assert "held-out" in info["final_rule"] and info["final_model"] in [s["name"] for s in results["stages"]]
    for name in ("config.resolved.yaml", "summary.md", "report.html", "model/config.json", "teacher/config.json",
                 "students/student-L3/config.json"):
        assert (demo_run / name).is_file(), name


@pytest.mark.slow
def test_tracking_lines(world: World) -> None:
    """--track files the run in MLflow beside the run dir; tracking.tensorboard writes events; the LoRA
    overrides reach the teacher's fine-tune."""
    pytest.importorskip("mlflow", reason="the track extra (mlflow-skinny) is not installed")
    pytest.importorskip("tensorboardX", reason="the track extra (tensorboardX) is not installed")
    runs = world.cwd / "runs"
    ok(run_line("tinyplm run recipes/glue/sst2_demo.yaml --track", world))
    assert (runs / "sst2_tracked" / "logs" / "tracking.json").is_file() and (runs / "mlruns").is_dir()
    ok(run_line("tinyplm run recipes/glue/sst2_demo.yaml tracking.tensorboard=true", world))
    assert list((runs / "sst2_tensorboard" / "tensorboard").rglob("events.out.tfevents.*"))
    ok(run_line("tinyplm run recipes/glue/sst2_demo.yaml teacher.finetune.method=lora teacher.finetune.lr=1e-3",
                world))
    finetune = _yaml(runs / "sst2_lora" / "config.resolved.yaml")["teacher"]["finetune"]
    assert finetune["method"] == "lora" and finetune["lr"] == 1e-3


@pytest.mark.slow
def test_probe_and_heads_lines(world: World) -> None:
    """probe and heads on a model (the tiny teacher for minilm-l6): a page of plots for it."""
    for line in ("tinyplm probe minilm-l6 --task conll2003-pos --train-sentences 6000 --dev-sentences 1000",
                 "tinyplm heads minilm-l6 --task sst2"):
        stdout = ok(run_line(line, world))
        page = world.cwd / stdout.strip().splitlines()[-1].removeprefix("report: ")
        assert page.is_file(), (line, page)


def test_glue_table_of_the_recorded_runs(world: World) -> None:
    """Each run docs/results/glue_runs records is the GLUE trial its folder names (``TASK-sSEED``: the
    task and seed its resolved recipe and results say), and the table docs/results/glue.md shows
    under the command is, row for row, what the command writes from them."""
    page, written = _recorded_table(world, "tinyplm glue-table docs/results/glue_runs --out runs/glue_table",
                                    "glue_runs", "runs/glue_table/glue.md", recipe="glue_base")
    assert written and page == written, "docs/results/glue.md shows another table than glue-table writes"


def _recorded_table(world: World, line: str, records: str, written: str, recipe: str) -> tuple[list[str], list[str]]:
    """Checks that each run docs/results/``records`` holds is a run of ``recipe`` on the task and seed
    its folder names (``TASK-sSEED``), runs ``line``, and returns the rows of the first table after
    ``line`` in docs/results/glue.md and of the one ``line`` wrote to ``written``."""
    runs = sorted(p for p in (DOCS / "results" / records).iterdir() if p.is_dir())
    assert runs, f"docs/results/{records} records no run"
    for run in runs:
        config, results = _yaml(run / "config.resolved.yaml"), _results(run)
        assert run.name == f"{config['task']['name']}-s{config['seed']}", run
        assert config["name"] == recipe and results["task"] == config["task"]["name"], run
    ok(run_line(line, world))
    page = first_table((DOCS / "results" / "glue.md").read_text(encoding="utf-8"), after=line)
    return page, first_table((world.cwd / written).read_text(encoding="utf-8"))


def test_paradigm_table_of_the_recorded_runs(world: World) -> None:
    """Each run docs/results/paradigm_runs records is the paradigm run its folder names
    (``TASK-sSEED``), and the table docs/results/glue.md shows under the command is, row for row,
    what the command writes from them."""
    page, written = _recorded_table(
        world, "tinyplm paradigm-table docs/results/paradigm_runs --out runs/paradigm_table", "paradigm_runs",
        "runs/paradigm_table/paradigms.md", recipe="glue_paradigms")
    assert written and page == written, "docs/results/glue.md shows another table than paradigm-table writes"


@pytest.mark.slow
def test_demo_run_benchmarks(world: World, demo_run: Path) -> None:
    """The benchmarks that read the demo run, on the tiny one; each prints its JSON's path last."""
    for line in ("python benchmarks/train_step.py runs/sst2_demo/teacher runs/sst2_demo/students/student-L3",
                 "python benchmarks/student_families.py --teacher runs/sst2_demo/teacher --task sst2"):
        path = Path(ok(run_line(line, world)).strip().splitlines()[-1])
        assert (world.cwd / path).is_file(), (line, path)


@pytest.mark.slow
def test_serve_line(world: World, demo_run: Path) -> None:
    """tinyplm serve on the demo run answers /ready and a prediction, and exits 0 on SIGTERM."""
    import signal
    import threading

    import httpx

    command = [sys.executable, "-m", "tinyplm.cli", *argv("tinyplm serve runs/sst2_demo --port 8000", world)]
    env = {**os.environ, **world.env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = warm.popen(command, cwd=world.cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    lines: list[str] = []
    listening = threading.Event()

    def read() -> None:
        for got in proc.stderr:
            lines.append(got)
            if "listening on " in got:
                listening.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert listening.wait(120), "".join(lines[-20:])
        url = re.search(r"listening on (http://\S+?)(?: |$)", "".join(lines)).group(1)
        for _ in range(300):
            if httpx.get(url + "/ready", timeout=5).status_code == 200:
                break
            time.sleep(0.1)
        answer = httpx.post(url + "/predict", json={"text": "a gripping, funny film"}, timeout=30)
        assert answer.status_code == 200 and answer.json()["prediction"]["label"], answer.text
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 0, "".join(lines[-20:])


@pytest.mark.slow
def test_task_benchmarks(world: World) -> None:
    """squad.py and conll.py run their recipes (shrunk) and print the results.json path last."""
    for line, out in (("python benchmarks/squad.py", "squad-bench"), ("python benchmarks/conll.py", "conll-bench")):
        stdout = ok(run_line(line, world))
        assert stdout.strip().splitlines()[-1].endswith("results.json"), stdout[-500:]
        assert _results(world.cwd / "runs" / out)["stages"], line


@pytest.mark.slow
def test_finetune_methods_line(world: World) -> None:
    """The fine-tuning methods benchmark's short line on the tiny teacher: one row per method, then the
    distillation pair."""
    line = ("python benchmarks/finetune_methods.py --task sst2 --methods full,lora,bitfit --seeds 1 --budget-minutes 2 "
            "--max-train-examples 3000")
    path = world.cwd / Path(ok(run_line(line, world)).strip().splitlines()[-1])
    assert path.is_file() and path.is_relative_to(world.cwd / "runs" / "finetune_methods_short"), path
    result = json.loads(path.read_text())
    assert [r["method"] for r in result["rows"]] == ["full", "lora", "bitfit"] and result["distillation"], result


@pytest.mark.slow
def test_sst2_pareto_run(world: World) -> None:
    ok(run_line("tinyplm run recipes/glue/sst2_pareto.yaml", world))
    assert [s["name"] for s in _results(world.cwd / "runs" / "sst2_pareto")["stages"]] == ["teacher", "student"]
