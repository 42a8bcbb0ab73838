# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test quick lint typecheck unit cdk-synth bench clean venv

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

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
