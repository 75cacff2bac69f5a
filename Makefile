# Two commands for a fresh machine with Python 3.11+: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PACKAGES := session agent_loop persistence_jsonl recovery checkpoint_policy agent_session bench

.PHONY: test test-fast demo bench lint typecheck pytest clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required, found " + sys.version)'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,dev]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy --strict $(PACKAGES)

pytest: $(STAMP)
	$(BIN)/pytest -q

test: lint typecheck pytest

test-fast: $(STAMP)
	$(BIN)/pytest -q -m "not slow"

demo: $(STAMP)
	$(BIN)/agent-session demo --crash tool

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build *.egg-info
