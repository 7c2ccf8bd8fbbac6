PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The exact versions of every package the venv holds, which make test last passed with: the index
# moves, the checkout does not. `make lock` resolves them afresh.
CONSTRAINTS := .ci/constraints.txt
PIP_INSTALL = PYTHONWARNINGS=ignore $(1)/python -m pip install -q -c $(CONSTRAINTS)
BENCH_TOOLS := matplotlib py-spy pyinstrument
# What the official SDK's own tests import besides the SDK (make official).
OFFICIAL_TOOLS := inline-snapshot dirty-equals trio pillow logfire
# Their own venv: some register pytest plugins, which make test must not load.
OFFICIAL_VENV := .venv-official

.PHONY: install demo test lint typecheck imports pytest conformance official interop clean fleet e2e nemesis bench wheel lock

$(STAMP): pyproject.toml $(CONSTRAINTS)
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(call PIP_INSTALL,$(BIN)) --upgrade pip
	# The build backend's notice about editable installs does not apply (packages are listed
	# explicitly in pyproject.toml): keep a first `make demo` quiet.
	$(call PIP_INSTALL,$(BIN)) -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy engine $(wildcard stores)
	$(BIN)/mypy bench/run.py bench/ab.py bench/journal_ui.py bench/loadgen.py bench/micro.py bench/spans.py bench/servers/floor.py bench/servers/official.py bench/typescript_peer.py bench/journal_cap.py

imports: $(STAMP)
	$(BIN)/python tests/import_graph.py

# The suite in parallel (pytest-xdist), one process more than the cores, each test file on one
# worker so a module's server starts once: most tests wait on servers and processes they start,
# and the extra worker fills those waits (docs/benchmarks.md). PYTEST_WORKERS=0 runs it in one
# process.
PYTEST_WORKERS ?= $(shell $(PY) -c 'import os; print((os.cpu_count() or 1) + 1)')

pytest: $(STAMP)
	$(BIN)/python tests/redis_server.py -- $(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test: lint typecheck imports pytest

conformance: $(STAMP)
	$(BIN)/python tests/run_conformance.py 2026-07-28 2025-11-25 tasks

# The official mcp 2.3.0 server tests and tutorials, imports rewritten to engine (tests/official).
$(OFFICIAL_VENV)/.installed: pyproject.toml $(CONSTRAINTS)
	test -x $(OFFICIAL_VENV)/bin/python || $(PY) -m venv $(OFFICIAL_VENV)
	$(call PIP_INSTALL,$(OFFICIAL_VENV)/bin) --upgrade pip
	$(call PIP_INSTALL,$(OFFICIAL_VENV)/bin) -e '.[dev]' $(OFFICIAL_TOOLS)
	touch $@

official: $(OFFICIAL_VENV)/.installed
	$(OFFICIAL_VENV)/bin/python tests/official/run.py $(OFFICIAL_ARGS)

# Real MCP clients (pinned; fetched once from npm and PyPI into ~/.cache/engine-interop). They
# also run in `make test`; this runs only them.
interop: $(STAMP)
	$(BIN)/pytest -m interop $(PYTEST_ARGS)

fleet: $(STAMP)
	$(BIN)/python deploy/fleet.py $(FLEET_ARGS)

# The wheel of this checkout installed into a fresh venv outside it, serving a 2-round call.
wheel: $(STAMP)
	ENGINE_WHEEL=1 $(BIN)/python tests/redis_server.py -- $(BIN)/pytest tests/packaging $(PYTEST_ARGS)

e2e: $(STAMP)
	ENGINE_E2E=1 $(BIN)/python tests/redis_server.py -- $(BIN)/pytest tests/e2e tests/faults tests/nemesis $(PYTEST_ARGS)

# A fleet under a seeded schedule of faults, its clients' history checked (tests/nemesis). The
# seed is printed first; SEED=... replays a run's schedule.
SEED ?=
DURATION ?= 600
TASKS ?= 1000
CALLS ?= 10000
nemesis: $(STAMP)
	$(BIN)/python -m tests.nemesis.run $(if $(SEED),--seed $(SEED)) --duration $(DURATION) \
	  --tasks $(TASKS) --calls $(CALLS) $(NEMESIS_ARGS)

bench: $(STAMP)
	$(call PIP_INSTALL,$(BIN)) $(BENCH_TOOLS)
	$(BIN)/python tests/redis_server.py -- $(BIN)/python bench/run.py --repeat 3 --profile $(BENCH_ARGS)

# Resolves the dev extra, the bench tools and the official peer's server afresh in a scratch venv
# and writes what it got to $(CONSTRAINTS); run make test before committing the new file.
lock:
	rm -rf .venv-lock && $(PY) -m venv .venv-lock
	.venv-lock/bin/python -m pip install -q --upgrade pip
	PYTHONWARNINGS=ignore .venv-lock/bin/python -m pip install -q -e '.[dev]' $(BENCH_TOOLS) $(OFFICIAL_TOOLS) 'uvicorn[standard]'
	{ sed -n '/^#/p' $(CONSTRAINTS); .venv-lock/bin/python -m pip freeze --all --exclude-editable \
	  | grep -v -e '^setuptools==' -e '^wheel=='; } > $(CONSTRAINTS).new
	mv $(CONSTRAINTS).new $(CONSTRAINTS) && rm -rf .venv-lock

clean:
	rm -rf $(VENV) $(OFFICIAL_VENV) .venv-lock .mypy_cache .ruff_cache bench/.venv-official bench/results
