# Two commands on a fresh machine: `make demo` and `make test`. Both build the venv they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# pytest-xdist processes for `make test` (README "Tests"): three on the 2-core machine it is sized for, since
# two left the cores 14% idle while tests waited on Postgres, on processes and on each other (271 s against
# 247 s for the suite on December 3, 2026).
PYTEST_WORKERS ?= 3

.PHONY: demo test lint format bench clean lock

# Every dependency, dev tools and the build backend included, comes from requirements.lock by hash; the
# project itself goes in editable and without build isolation, so nothing unlocked is fetched. pip
# installs only uv (by hash too); uv installs the rest: it downloads and byte-compiles in parallel, which
# took a fresh clone's install from 50-75 s to 15-30 s on this machine.
UV_INSTALL := $(BIN)/uv pip install --quiet --python $(BIN)/python

$(STAMP): requirements.lock pyproject.toml $(BIN)/uv
	$(UV_INSTALL) --require-hashes --compile-bytecode -r requirements.lock
	$(UV_INSTALL) --no-deps --no-build-isolation --compile-bytecode -e .
	touch $(STAMP)

$(BIN)/uv: requirements-uv.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes --only-binary :all: -r requirements-uv.lock

# Re-resolve requirements.lock from pyproject.toml (after changing a pin); pins it already holds are kept.
lock: $(BIN)/uv
	$(BIN)/uv pip compile pyproject.toml --extra dev --universal --generate-hashes -o requirements.lock

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
