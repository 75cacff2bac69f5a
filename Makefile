# Two commands for a fresh machine with Python 3.11+: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUNTIME := $(VENV)/.runtime
PACKAGES := session agent_loop persistence_jsonl recovery checkpoint_policy agent_session bench
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check

.PHONY: test test-fast demo bench lint typecheck pytest clean venv

venv:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required, found " + sys.version)'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)

# The demo needs only the runtime dependencies; the tests add the test and dev tools.
$(RUNTIME): pyproject.toml
	@$(MAKE) --no-print-directory venv
	@echo "installing the runtime dependencies into $(VENV)"
	@$(PIP) -e .
	@touch $(RUNTIME)

$(STAMP): pyproject.toml
	@$(MAKE) --no-print-directory venv
	@echo "installing the test and dev tools into $(VENV)"
	@$(PIP) -e '.[test,dev]'
	@touch $(STAMP) $(RUNTIME)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy --strict $(PACKAGES)

pytest: $(STAMP)
	$(BIN)/pytest -q

test: lint typecheck pytest

# The library's tests without the long sweeps and the real child processes (under 30 s).
test-fast: $(STAMP)
	$(BIN)/pytest -q -n auto -m "not slow and not process"

demo: $(RUNTIME)
	@$(BIN)/agent-session demo --crash tool

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build *.egg-info
