# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test quick lint typecheck unit cdk-synth bench clean venv lock

# Every package from requirements-dev.lock, each checked against the hashes locked for it (pip and the
# build backend of the editable install included: no build isolation, which would fetch them unchecked).
$(STAMP): requirements-dev.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements-dev.lock
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

venv: $(STAMP)

# Regenerate requirements.lock, requirements-dev.lock and infra/cli/package-lock.json after changing
# requirements.txt, requirements-dev.txt or infra/cli/package.json (.ci/lock; needs PyPI and npm).
lock: $(STAMP)
	UV=$(BIN)/uv .ci/lock

demo: $(STAMP)
	.ci/install-kubectl
	$(BIN)/fleetwright demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PYTHONPATH=layers $(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	.ci/install-kubectl
	$(BIN)/pytest -n 2 --durations=25

# The fast subset for the edit loop: tests that start no moto, emulator, workflow harness or CDK synthesis
# and are not marked slow (tests/conftest.py). `make test` runs everything.
quick: $(STAMP)
	$(BIN)/pytest -n 2 -m "not slow"

cdk-synth: $(STAMP)
	.ci/cdk-synth

test: lint typecheck unit cdk-synth

bench: $(STAMP)
	$(BIN)/python bench/scheduling.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
