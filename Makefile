# Two commands: `make test` and `make study`. Both create .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_VERSION := 2.13.0
STAMP := $(VENV)/.installed

.PHONY: test study bench install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch is installed first and pinned, so no later requirement can resolve a CUDA build.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==$(TORCH_VERSION)
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 tests

study: $(STAMP)
	$(BIN)/vitpos study

# the performance tables of BENCHMARKS.md (tens of minutes on 2 cores; run on a quiet machine)
bench: $(STAMP)
	$(BIN)/python -m bench --out BENCHMARKS.md

clean:
	rm -rf $(VENV) runs .pytest_cache
