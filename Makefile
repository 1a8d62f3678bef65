# Two commands do all the set-up (see README): `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
OUT ?= results/fig3

.PHONY: run test test-slow lint venv clean

$(BIN)/gossipsim: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(BIN)/gossipsim

venv: $(BIN)/gossipsim

## run the paper's Fig. 3 scenario end to end: tables and plots in $(OUT)/
run: venv
	$(BIN)/gossipsim run scenarios/fig3_beta_bernoulli.toml --out $(OUT) --workers 2

## lint, format check, type check, the layer contracts (import-linter), then the fast test suite
test: venv lint
	$(BIN)/python -m pytest -q -n auto

## the slow statistical tests too
test-slow: venv
	$(BIN)/python -m pytest -q -n auto -m "slow or not slow"

lint: venv
	$(BIN)/ruff check gossipsim tests benchmarks examples
	$(BIN)/ruff format --check gossipsim tests benchmarks examples
	$(BIN)/mypy gossipsim examples
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) results
