# Two commands for a fresh machine with Python 3.11+: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUNTIME := $(VENV)/.runtime
INTEROP := tests/interop/node_modules/.installed
PACKAGES := agent_session bench
# (no .pyc files written for all of every package: each module is compiled when imported)
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile
# Each module is compiled once, not in every one of the suite's thousand processes, even
# where the environment says not to write bytecode (__pycache__ is ignored by git).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: test test-fast test-exhaustive demo bench lint typecheck pytest clean venv interop wheel \
	system setup

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
	$(BIN)/mypy --strict --num-workers auto $(PACKAGES)

# The TypeScript reference stack (and the Node.js it needs), pinned by its lock file, for
# the tests that load this project's logs with it.
$(INTEROP): tests/interop/package-lock.json
	@echo "installing the TypeScript reference stack into tests/interop (npm)"
	@cd tests/interop && npm ci --no-audit --no-fund --silent
	@touch $(INTEROP)

interop: $(INTEROP)

# Debian's packages the tests use (Chromium, the PostgreSQL server, PgBouncer), installed as
# root when missing; not as root, scripts/ensure-chromium and scripts/with-postgres say what
# is missing, or use yours (AGENT_SESSION_CHROMIUM, AGENT_SESSION_PG_DSN).
system:
	@scripts/ensure-packages --if-root $(if $(AGENT_SESSION_CHROMIUM),,chromium) \
		$(if $(AGENT_SESSION_PG_DSN),,postgresql pgbouncer)

# Everything the tests need, the downloads side by side: the Python packages, the reference
# stack and the system packages; the lint and the type check start as soon as the Python
# packages are in.
setup:
	@$(MAKE) --no-print-directory -j 4 --output-sync=target lint typecheck interop system

# The PostgreSQL tests run against a throwaway server (scripts/with-postgres starts it, or
# uses yours when AGENT_SESSION_PG_DSN is set), on every core: every test has its own
# directories, databases and child processes. A worker that runs out of tests takes queued
# ones from the other (--dist worksteal), so none is left running a long queue alone.
# The browser tests drive Debian's Chromium (scripts/ensure-chromium installs it as root).
pytest: $(STAMP) $(INTEROP)
	scripts/ensure-chromium
	scripts/with-postgres $(BIN)/pytest -q -n auto --dist worksteal

test: setup
	@$(MAKE) --no-print-directory pytest

# Every case of the exhaustive sweeps (every byte cut, every kill point, class and store),
# of which make test runs a seeded sample (tests/sweeps.py).
test-exhaustive: $(STAMP) $(INTEROP)
	scripts/ensure-chromium
	AGENT_SESSION_EXHAUSTIVE=1 scripts/with-postgres $(BIN)/pytest -q -n auto --dist worksteal

# The library's tests without the long sweeps and the real child processes, each property
# test trying a quarter of its examples (tests/sweeps.py).
test-fast: $(STAMP)
	AGENT_SESSION_FAST=1 scripts/with-postgres $(BIN)/pytest -q -n auto --dist worksteal -m "not slow and not process"

# The wheel and the sdist a project of its own installs (dist/).
wheel: venv
	@$(PIP) 'build>=1.2'
	$(BIN)/python -m build --outdir dist

demo: $(RUNTIME)
	@$(BIN)/agent-session demo --crash tool

bench: $(STAMP) $(INTEROP)
	scripts/with-postgres $(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build dist *.egg-info
	rm -rf tests/interop/node_modules
