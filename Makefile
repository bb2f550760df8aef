# Two commands on a fresh machine: `make demo` and `make test`. Both build the venv they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
UV_VERSION := 0.13.9
# pytest-xdist processes for `make test` (README "Tests"): one per core of the 2-core machine it is sized for.
PYTEST_WORKERS ?= 2

.PHONY: demo test lint format bench clean lock

# Every dependency, dev tools and the build backend included, comes from requirements.lock by hash; the
# project itself goes in editable and without build isolation, so nothing unlocked is fetched.
$(STAMP): requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

# Re-resolve requirements.lock from pyproject.toml (after changing a pin); pins it already holds are kept.
lock: $(BIN)/uv
	$(BIN)/uv pip compile pyproject.toml --extra dev --universal --generate-hashes -o requirements.lock

$(BIN)/uv:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet uv==$(UV_VERSION)

demo: $(STAMP)
	$(BIN)/billsleuth demo

test: $(STAMP) lint
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist worksteal

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/python benchmarks/cli_latency.py
	$(BIN)/python benchmarks/audit_sweep.py
	$(BIN)/python benchmarks/slack_latency.py
	$(BIN)/python benchmarks/ledger_import.py

clean:
	rm -rf $(VENV) var
