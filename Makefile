# The Quickstart's two entry points: `make demo` runs the main job, `make test` the tests (what CI runs).
# Both run `make setup` first: tools/setup.sh installs chromium (apt, when root), the CPU or CUDA build of
# torch, and agentgym with every extra into .venv at the versions locked in constraints.txt.
# Data: $AGENTGYM_DATA, else the per-user default (see README, Data); the Makefile sets no default of its own.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export PYTHON VENV

.PHONY: setup demo test test-all bench lint lock docs figures

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt tools/setup.sh
	bash tools/setup.sh
	touch $@

demo: setup
	$(BIN)/python tools/demo.py

test: setup
	$(BIN)/python -m pytest -q

test-all: setup
	$(BIN)/python -m pytest -q -m "not gpu"

bench: setup
	$(BIN)/python -m pytest tests/benchmarks --benchmark-only -m "" -v   # -v: each benchmark named as it starts, with the share done

# The multi-seed learning check of every baseline, rerun; then every figure block of the docs re-rendered from its
# record (docs/figures/*.json). `python tools/figures.py --render` re-renders without training.
figures: setup
	$(BIN)/python tools/figures.py

lint: setup
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

# Regenerate constraints.txt from .venv after a deliberate upgrade (then commit it).
lock:
	$(BIN)/python tools/lock.py write

# The docs site (mkdocs-material + mkdocstrings) into site/, warnings as errors.
docs: setup
	$(BIN)/mkdocs build --strict
