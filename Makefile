# Development pins live here, not in pyproject's ranges: torch 2.13.0 is a CPU build on local
# disk (a looser spec downloads a multi-GB GPU build); triton 3.6.0 is the H200 machine's.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# numpy 2.4 breaks int() of 1-element arrays, which the Triton 3.6 interpreter relies on.
PINS := torch==2.13.0 triton==3.6.0 "fbgemm-gpu-cpu==1.8.*" numpy==2.3.5 pytest-xdist==3.8.0
# Tests run on every core (pytest-xdist), a test file on one worker: several files set up
# one costly fixture for all their cases (the Triton interpreter's process, a Ray cluster,
# a wheel). Workers share one build cache per run (tests/conftest.py).
PYTEST := $(BIN)/python -m pytest -n auto --dist loadfile
# The edit-loop tier: the IR, schedules, op semantics, generated sources (golden), the
# import-direction law and the CLI, without the `slow` cases; its build cache is kept in
# .kevolve/ between runs.
CHECK_TESTS := tests/ir tests/schedule tests/ops tests/cli tests/test_golden_sources.py \
	tests/test_layers.py tests/test_docs_embedding.py

.PHONY: setup hipcc chromium demo test check lint clean conform-all

$(BIN)/kevolve: pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q $(PINS) -e ".[dev]"
	touch $(BIN)/kevolve

setup: $(BIN)/kevolve

# The hip backend's tests compile for AMD targets with Debian's hipcc: installed here where
# this user can (root with apt-get); elsewhere those tests skip, and fail under CI=true.
hipcc:
	@command -v hipcc >/dev/null 2>&1 || { \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hipcc >/dev/null; \
	  else echo "hipcc is not installed and cannot be here (needs root and apt-get): the hip tests will skip"; fi; }

# The report test looks at the bench's HTML report in headless Chromium: installed here where
# this user can (root with apt-get); elsewhere that test skips, and fails under CI=true.
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium is not installed and cannot be here (needs root and apt-get): the report's browser test will skip"; fi; }

demo: setup
	$(BIN)/kevolve evolve softmax --backend cpu --budget 40

test: setup hipcc chromium
	$(BIN)/ruff check kevolve tests benchmarks examples
	$(PYTEST)

check: setup
	$(BIN)/ruff check kevolve tests benchmarks examples
	KEVOLVE_CACHE=$${KEVOLVE_CACHE:-$(CURDIR)/.kevolve/test-cache} $(PYTEST) -m "not slow" \
	  $(CHECK_TESTS)

# Every ATen catalog op on every CPU backend (the tests run a rotating share): the spec
# against torch (interp), then default-schedule kernels on cpu, numba and Triton's
# interpreter. One JSON per backend under .kevolve/conform/; exits 1 if any op fails.
CONFORM_OUT := .kevolve/conform
conform-all: setup
	mkdir -p $(CONFORM_OUT)
	status=0; \
	for b in interp cpu numba triton; do \
	  flag=$$( [ $$b = triton ] && echo --interpret ); \
	  $(BIN)/kevolve conform --backend $$b $$flag --json > $(CONFORM_OUT)/$$b.json || status=1; \
	  $(BIN)/python -c "import json,sys; s=json.load(open(sys.argv[1]))['summary']; \
	    print(sys.argv[2], s['passed'], '/', s['ops'], s['failures_by_stage'])" \
	    $(CONFORM_OUT)/$$b.json $$b; \
	done; exit $$status

lint: setup
	$(BIN)/ruff check kevolve tests benchmarks examples

clean:
	rm -rf $(VENV) build dist *.egg-info .kevolve
