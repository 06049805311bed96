# Two commands: `make test` and `make study`. Both create .venv on first use.
# `make lint` runs the format, lint and type checks that `make test` starts with; `make fix` applies ruff's fixes.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_VERSION := 2.13.0
STAMP := $(VENV)/.installed

.PHONY: test lint fix study bench install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch is installed first and pinned, so no later requirement can resolve a CUDA build.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==$(TORCH_VERSION)
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)
	@echo "vitpos is installed in $(BIN): run 'source $(BIN)/activate' to put vitpos on the PATH, or call $(BIN)/vitpos"

install: $(STAMP)

LINTED := src tests bench

test: lint
	$(BIN)/python -m pytest -n 2 tests

lint: $(STAMP)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/mypy

fix: $(STAMP)
	$(BIN)/ruff format $(LINTED)
	$(BIN)/ruff check --fix $(LINTED)

study: $(STAMP)
	$(BIN)/vitpos study

# the performance tables of BENCHMARKS.md (tens of minutes on 2 cores; run on a quiet machine)
bench: $(STAMP)
	$(BIN)/python -m bench --out BENCHMARKS.md

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache .mypy_cache
