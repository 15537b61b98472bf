# The commands people type. Each target creates or reuses .venv and installs what it needs.
#   make run    - the main job: `bubblescope run` on the best preset this machine holds (debug on CPU)
#   make test   - the default test suite, <= 5 min on a 2-core CPU box (long end-to-end tests marked `slow`
#                 are left out; GPU tests skip without CUDA); the 15 slowest tests are listed at the end.
#                 Runs on every core (pytest-xdist, TEST_JOBS=auto; TEST_JOBS=0 runs in this process):
#                 1.8x faster than one process on the shared 2-core box (benchmarks/RESULTS.md)
#   make test-all - every test, `slow` ones included

VENV    ?= .venv
PYTHON  ?= python3
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
# pip takes this exact torch from the machine's wheel store when it has one (a CPU build on CI);
# elsewhere from PyPI. An existing newer torch in the venv is kept.
TORCH   ?= torch==2.13.0
# pytest-xdist workers; worksteal lets an idle worker take tests still queued on a busy one (a few
# tests take most of the time).
TEST_JOBS ?= auto
XDIST   := -n $(TEST_JOBS) --dist worksteal

.PHONY: setup run test test-all lint bench-analyze clean

setup: $(STAMP)

$(STAMP): pyproject.toml setup.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[dev]"
	@touch $(STAMP)

run: setup
	$(VENV)/bin/bubblescope run $(ARGS)

test: setup
	@$(PY) tools/ensure_browser.py || true
	$(PY) -m pytest -q -m "not slow" $(XDIST) --durations=15 $(ARGS)

test-all: setup
	@$(PY) tools/ensure_browser.py || true
	$(PY) -m pytest -q $(XDIST) --durations=15 $(ARGS)

lint: setup
	$(VENV)/bin/ruff check bubblescope reference_model kernels tests benchmarks tools
	$(VENV)/bin/ruff format --check bubblescope reference_model kernels tests benchmarks tools

clean:
	rm -rf $(VENV) build *.egg-info
