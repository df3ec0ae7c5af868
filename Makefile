# Two commands from a fresh clone (only Python 3.11+ needed):
#   make demo    the main job on the embedded defaults (dev server, SQLite, offline model)
#   make test    the tests (the README's test command); `make test ARGS=tests/unit` for a part
# `make docs` builds the docs site into build/site (strict: `make lint` runs it too).
# Both create the virtual environment in .venv on first use and reuse it after; the
# project is reinstalled only when pyproject.toml is newer than the last install.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PROMPT ?= Write a hello script and run it
ARGS ?=

.PHONY: demo test lint docs

demo: $(VENV)/.installed
	$(BIN)/duragent run "$(PROMPT)"

test: $(VENV)/.installed-dev
	$(BIN)/pytest $(ARGS)

lint: $(VENV)/.installed-dev docs
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# NO_MKDOCS_2_WARNING: no banner about a future MkDocs on every build.
docs: $(VENV)/.installed-dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The stamps record which install is current; the dev one includes the plain one.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed
