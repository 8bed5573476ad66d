# Two commands for a fresh machine: `make demo` and `make test`. Both build the virtualenv from
# this repository's own files first; nothing needs installing by hand beyond Python >= 3.11.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench install clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/bot demo

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest

bench: install
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache
