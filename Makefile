# `make demo`: set up .venv and run the SST-2 demo recipe; `make test`: set up and run the tests.
# Set-up is idempotent: it reinstalls only when pyproject.toml changed or .venv is incomplete.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.tinyplm-installed
DEMO_RECIPE := recipes/glue/sst2_demo.yaml
DEMO_DIR := runs/sst2_demo

.PHONY: setup demo test clean-demo

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# torch first and exactly: the CPU wheel on this machine; any other request pulls CUDA builds.
	$(BIN)/pip install --disable-pip-version-check -q torch==2.13.0
	$(BIN)/pip install --disable-pip-version-check -q -e ".[test]"
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

test: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/python -m pytest -q

clean-demo:
	rm -rf $(DEMO_DIR)
