PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint typecheck imports pytest conformance interop clean fleet e2e bench wheel

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# The build backend's notice about editable installs does not apply (packages are listed
	# explicitly in pyproject.toml): keep a first `make demo` quiet.
	PYTHONWARNINGS=ignore $(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy engine $(wildcard stores)
	$(BIN)/mypy bench/run.py bench/ab.py bench/loadgen.py bench/micro.py bench/spans.py bench/servers/floor.py bench/servers/official.py

imports: $(STAMP)
	$(BIN)/python tests/import_graph.py

pytest: $(STAMP)
	$(BIN)/python tests/redis_server.py -- $(BIN)/pytest $(PYTEST_ARGS)

test: lint typecheck imports pytest

conformance: $(STAMP)
	$(BIN)/python tests/run_conformance.py 2026-07-28 2025-11-25 tasks

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
	ENGINE_E2E=1 $(BIN)/python tests/redis_server.py -- $(BIN)/pytest tests/e2e $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python -m pip install -q matplotlib py-spy pyinstrument
	$(BIN)/python tests/redis_server.py -- $(BIN)/python bench/run.py --repeat 3 --profile $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache bench/.venv-official bench/results
