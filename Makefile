# Development pins live here, not in pyproject's ranges: torch 2.13.0 is a CPU build on local
# disk (a looser spec downloads a multi-GB GPU build); triton 3.6.0 is the H200 machine's.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# numpy 2.4 breaks int() of 1-element arrays, which the Triton 3.6 interpreter relies on.
PINS := torch==2.13.0 triton==3.6.0 "fbgemm-gpu-cpu==1.8.*" numpy==2.3.5

.PHONY: setup demo test lint clean

$(BIN)/kevolve: pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q $(PINS) -e ".[dev]"
	touch $(BIN)/kevolve

setup: $(BIN)/kevolve

demo: setup
	$(BIN)/kevolve evolve softmax --backend cpu --budget 40

test: setup
	$(BIN)/ruff check kevolve tests benchmarks
	$(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check kevolve tests benchmarks

clean:
	rm -rf $(VENV) build dist *.egg-info .kevolve
