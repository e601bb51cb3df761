# Every target creates or refreshes .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint bench clean

# The tests' kind from outside (tests/kinds/keyvalue) is installed as its own
# distribution, so that undogate finds it only through its entry point (docs/kinds.md).
$(STAMP): pyproject.toml tests/kinds/keyvalue/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -m pip install --quiet --no-deps -e tests/kinds/keyvalue
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/undogate demo

# The suite starts undogate as a process hundreds of times (serve, the CLI, MCP over
# stdio); compiled once here, none of them compiles it again, even where
# PYTHONDONTWRITEBYTECODE is set (CI sets it). The run is parallel (pyproject.toml).
test: $(STAMP)
	bash scripts/system-deps.sh
	$(BIN)/python -m compileall -q src tests
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

bench: $(STAMP)
	command -v strace >/dev/null || (apt-get update -qq && apt-get install -y -qq strace) || true
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) .venv-kinto .venv-radicale .venv-xandikos .venv-moto .npm-servers .pytest_cache .mypy_cache .ruff_cache
