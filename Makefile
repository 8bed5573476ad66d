# Two commands for a fresh machine: `make demo` and `make test`. Both build the virtualenv from
# this repository's own files first; nothing needs installing by hand beyond Python >= 3.11.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo sandbox test check lint bench install clean lock

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/bot demo

# The offline Slack path behind a local web page (http://127.0.0.1:3100/); SANDBOX_PORT to move it.
SANDBOX_PORT ?= 3100

sandbox: install
	$(BIN)/bot sandbox --port $(SANDBOX_PORT)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The tests run in parallel: four pytest workers (each with its own PostgreSQL database and
# SQLite files; Redis keys are namespaced per test). Four on a 2-core machine because the suite
# mostly waits (on child processes, servers, timeouts), so two workers leave the CPUs half idle
# (see README, "Two commands"). TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 4

test: lint
	$(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal

# The fast loop (CONTRIBUTING.md): lint, types, and the unit and contract tests on SQLite and the
# memory store only (the PostgreSQL and Redis runs deselected, the skips for any left), so it
# needs nothing but Python. `make test` stays the whole suite (CI).
check: lint
	BOT_TEST_SKIP_POSTGRES=1 BOT_TEST_SKIP_REDIS=1 $(BIN)/pytest -q -n 2 \
		-m "not postgres and not redis" tests/unit tests/contract

# The deploy lock file: every package pinned, resolved from pyproject.toml (docs/operations.md, "Deploy").
lock: install
	$(BIN)/python -m pip install --quiet uv
	$(BIN)/uv pip compile pyproject.toml --universal --python-version 3.11 --upgrade \
		-o requirements.lock

bench: install
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) data artifacts .pytest_cache .mypy_cache .ruff_cache
