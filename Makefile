# Newcomer's commands: `make demo` (set up and run on embedded defaults), `make test`.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
DEMO_USER ?= admin
DEMO_PASSWORD ?= pdd-demo-admin
# The demo data plane's engine: timed (roofline-paced, the default) or llamacpp (a real GGUF model
# on llama.cpp; installs the [llamacpp] extra, which compiles with the trimmed CMake flags below).
ENGINE ?= timed
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF

.PHONY: venv install demo serve test lint typecheck ci clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@

$(VENV)/.installed-llamacpp: $(VENV)/.installed
	$(BIN)/pip install --quiet -e ".[dev,llamacpp]"
	touch $@

venv install: $(VENV)/.installed $(if $(filter llamacpp,$(ENGINE)),$(VENV)/.installed-llamacpp)

# The control plane (SQLite, in-memory channels, in-process tasks), the demo data plane registered
# with it and replayed load, all on this machine; Ctrl-C stops everything.
demo: install
	PDD_DEMO_ENGINE=$(ENGINE) $(BIN)/python manage.py run_demo --host $(HOST) --port $(PORT) --operator $(DEMO_USER) --password $(DEMO_PASSWORD)

# The control plane alone (no data plane, no load).
serve: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py seed_demo --operator $(DEMO_USER) --password $(DEMO_PASSWORD)
	@echo ""
	@echo "  Dashboard:  http://$(HOST):$(PORT)/   (log in as $(DEMO_USER) / $(DEMO_PASSWORD))"
	@echo "  API docs:   http://$(HOST):$(PORT)/api/docs/"
	@echo ""
	$(BIN)/daphne -b $(HOST) -p $(PORT) controlplane.asgi:application

test: install
	$(BIN)/pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy --strict pdd_core
	$(BIN)/mypy controlplane frontend

ci: lint typecheck test

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
