# `make demo`: set up .venv and run the SST-2 demo recipe; `make test`: set up and run the tests.
# Set-up is idempotent: it reinstalls only when pyproject.toml changed or .venv is incomplete.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.tinyplm-installed
DEMO_RECIPE := recipes/glue/sst2_demo.yaml
DEMO_DIR := runs/sst2_demo

.PHONY: setup demo test clean-demo glue paradigms proposal

setup: $(STAMP)

# pip --no-compile: set-up does not byte-compile every installed module (torch, transformers, ray
# ...: over a minute on 2 cores); Python compiles the ones a run imports, once, on first import. So
# Python must be free to write that bytecode: a PYTHONDONTWRITEBYTECODE in the caller's environment
# would make every process compile its imports again.
unexport PYTHONDONTWRITEBYTECODE
PIP := $(BIN)/pip install --disable-pip-version-check -q --no-compile

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# torch first and exactly: the CPU wheel on this machine; any other request pulls CUDA builds.
	$(PIP) torch==2.13.0
	$(PIP) -e ".[test]"
	@touch $(STAMP)

demo: setup
	@if [ -f $(DEMO_DIR)/results.json ]; then \
	  echo "$(DEMO_DIR) already holds a finished demo run (rerun: $(BIN)/tinyplm run $(DEMO_RECIPE) --force)"; \
	  echo "report: $(DEMO_DIR)/report.html"; \
	elif [ -f $(DEMO_DIR)/config.resolved.yaml ]; then \
	  $(BIN)/tinyplm run $(DEMO_RECIPE) --resume; \
	else \
	  $(BIN)/tinyplm run $(DEMO_RECIPE); \
	fi

# The tests run with bf16 forced on (TINYPLM_BF16=on: training's precision 'auto' is bf16 whatever
# the CPU), then the tests whose code resolved 'auto' run again with it forced off, so a CPU with or
# without native bf16 hides neither path (one test of each file: tests/conftest.py).
# Subprocesses inherit the switch; only tests run in-process are listed for the second pass.
AUTO_LOG := $(CURDIR)/.pytest_cache/tinyplm-auto-precision.txt
# Two pytest-xdist workers: most tests use one core (one torch thread, or a subprocess waiting on
# imports), so two keep a 2-core machine busy. Tests are handed out one by one (--dist load), so a
# file's module fixtures may be built on both workers: with each file kept whole on one worker
# (--dist loadfile) the first pass took longer (docs/results/code-choices.md, "The test suite").
# The tests that start Ray (marked ray) run after, alone: a Ray cluster sized to the machine beside
# another worker's tests slows both several times over. TEST_WORKERS=0 runs the first pass in this
# process, one test after another.
# (Three workers were slower on 2 cores than two: docs/results/code-choices.md, "The test suite".)
# The first pass prints its 25 slowest steps, so a CI log says where its time went.
# The later passes are handed only the files that hold their tests (those with a ray mark; those
# the first pass listed), so they do not collect all ~2,500 tests to run a few dozen.
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --dist load
RAY_FILES = $$(grep -rl --include='test_*.py' 'mark\.ray' tests)
AUTO_FILES = $$(sed 's/::.*//' $(AUTO_LOG) | sort -u)

test: setup
	$(BIN)/ruff check src tests benchmarks
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -d $(CURDIR)/.pytest_cache/site
	rm -f $(AUTO_LOG)
	TINYPLM_BF16=on TINYPLM_AUTO_LOG=$(AUTO_LOG) $(BIN)/python -m pytest -q $(XDIST) -m "not ray" --durations=25
	TINYPLM_BF16=on TINYPLM_AUTO_LOG=$(AUTO_LOG) $(BIN)/python -m pytest -q -m ray $(RAY_FILES)
	@if [ -s $(AUTO_LOG) ]; then \
	  echo "TINYPLM_BF16=off: the tests listed in $(AUTO_LOG)"; \
	  TINYPLM_BF16=off $(BIN)/python -m pytest -q $(XDIST) --auto-precision-only $(AUTO_LOG) $(AUTO_FILES); \
	else echo "no test resolved precision auto: no TINYPLM_BF16=off pass"; fi

# `make glue`: the GLUE table with the base-size teacher (issue 57, docs/results/glue.md): every task
# (the small ones under three seeds), one trial after another; long (about an hour a trial on 2
# cores). Run again after a kill, it continues: finished trials are read back, an unfinished one
# resumes from its checkpoints.
GLUE_SWEEP := runs/sweeps/glue_base

glue: setup
	@test -f runs/minilm-mlm/config.json || $(BIN)/tinyplm fit-mlm-head minilm-l6 --out runs/minilm-mlm --steps 500
	$(BIN)/tinyplm sweep recipes/glue_table/base.yaml --space sweeps/glue_base.yaml \
	  $$(test -d $(GLUE_SWEEP) && echo --resume)
	$(BIN)/tinyplm glue-table $(GLUE_SWEEP) --out runs/glue_table

# `make paradigms`: every compression paradigm on top of the base teacher's distilled student, on
# SST-2, MRPC and STS-B (issue 57, docs/results/glue.md); about two hours a task; resumable the same way.
PARADIGM_SWEEP := runs/sweeps/glue_paradigms

paradigms: setup
	@test -f runs/minilm-mlm/config.json || $(BIN)/tinyplm fit-mlm-head minilm-l6 --out runs/minilm-mlm --steps 500
	$(BIN)/tinyplm sweep recipes/glue_table/paradigms.yaml --space sweeps/glue_paradigms.yaml \
	  $$(test -d $(PARADIGM_SWEEP) && echo --resume)
	$(BIN)/tinyplm paradigm-table $(PARADIGM_SWEEP) --out runs/paradigm_table

# `make proposal`: everything the proposal's evaluation asks (issue 57), one run after another: the
# GLUE table, the paradigm table, SQuAD and CoNLL-2003 with the base teacher. Run again after a kill,
# it continues where it stopped; a finished part is read back, not run again.
BASE_RUNS := recipes/squad/v1_base.yaml:runs/squad_v1_base recipes/conll/ner_base.yaml:runs/conll_ner_base

proposal: glue paradigms
	@for pair in $(BASE_RUNS); do recipe=$${pair%%:*}; dir=$${pair#*:}; \
	  if test -f $$dir/results.json; then echo "$$dir: finished"; continue; fi; \
	  $(BIN)/tinyplm run $$recipe $$(test -d $$dir && echo --resume) || exit 1; done

clean-demo:
	rm -rf $(DEMO_DIR)
