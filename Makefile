# The two commands for a fresh machine: `make run` and `make test` (both set up what is missing).
# The test tiers (docs/tests.md): `make check` (lint, types, unit tests; no root, a few
# minutes), `make test` (check, then the integration tier against the real components),
# `make test-e2e` (every policy end to end, the full fault suite, the soak, the scenarios).
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
PYTEST_ARGS ?=
# the integration tier's alone (.ci/run leaves out what its Containernet tier runs instead)
INTEGRATION_ARGS ?=
# Bytecode in one cache outside the checkout and the virtualenvs, written even where
# PYTHONDONTWRITEBYTECODE is set (uv installs none, and the unit tier runs as nobody, who
# cannot write into root's virtualenv): else every process the tests start compiles scipy
# and the rest again (about 1 s each). scripts/unprivileged.sh gives nobody a cache of its own.
export PYTHONPYCACHEPREFIX ?= /var/cache/malb/pycache
unexport PYTHONDONTWRITEBYTECODE
# each tier's wall time is printed when it ends, and kept in $(MALB_TIMES) when that is set
TIMED := bash scripts/timed.sh
DURATIONS := --durations=25
# The controller runs under os-ken (docs/setup.md, "Frameworks"). On each newer Python that
# `make setup` found, `make test-e2e` runs the controller's own integration modules, which it
# also runs under Ryu (`make test-ryu`: those alone), and the unit tier: `make test` runs the
# unit tier on the newest only (NEWER_IN_TEST), for CI's time.
NEWER := 3.12 3.13
NEWER_IN_TEST := 3.13
CONTROLLER_TESTS := tests/integration/test_controller.py \
                    tests/integration/test_controller_process.py \
                    tests/integration/test_controller_multiswitch.py \
                    tests/integration/test_own_network.py
INTEGRATION := -m "integration and not e2e"

.PHONY: help setup setup-python run check lint types test-unit test test-integration \
        test-newer-unit test-newer-controller test-e2e test-ryu locks bench testbed \
        check-testbed clean-testbed clean

help:
	@echo "make run             set up what is missing, then compare srr, ln, malb-paper and malb (one run each, about 9 min)"
	@echo "make test            make check, then the integration tier: real OVS, Docker, Mininet, the controller, HAProxy, nginx, Prometheus, Chromium; the unit tier on Python 3.13 (about 20 min)"
	@echo "make check           lint (ruff), types (mypy) and the unit tier in parallel, without root (about 3 min)"
	@echo "make test-e2e        every policy end to end, the full fault suite, the soak, the scenarios, thorough fuzzing, the unit tier on Python 3.12, a resumed SLO experiment (about 35 min)"
	@echo "make setup           install packages, start OVS and Docker, virtualenvs from locks/, images (idempotent)"
	@echo "make locks           write locks/ again from pyproject.toml (uv), keeping the versions it can"
	@echo "make bench           the benchmarks experiments/registry.py marks for it (python -m benchmarks list: all)"
	@echo "make testbed         bring the paper testbed up with the Mininet CLI"
	@echo "make check-testbed   bring the paper testbed up, check connectivity, tear it down"
	@echo "make clean-testbed   remove leftovers: containers labelled malb, our bridges, namespaces"

setup:
	@$(TIMED) setup bash scripts/setup.sh

# what `make check` needs: the virtualenvs and the few Debian packages the unit tier uses
setup-python:
	@if [ -x $(PY) ] && bash scripts/setup.sh --python --is-current; then :; \
	 else $(TIMED) setup-python bash scripts/setup.sh --python; fi

run: setup
	$(PY) -m experiments.lb_comparison

check: setup-python lint types test-unit

lint: setup-python
	@$(TIMED) lint $(VENV)/bin/ruff check .

types: setup-python
	@$(TIMED) types $(VENV)/bin/mypy

# the unit tier, a worker per core; as root, it runs as `nobody` (where that user can
# read the checkout) to show that it needs no root
test-unit: setup-python
	@$(TIMED) unit bash scripts/unprivileged.sh $(PY) -m pytest -m "not integration" -n auto \
	  -p no:cacheprovider $(DURATIONS) $(PYTEST_ARGS)

# every part runs, whichever fails
test: check setup
	@rc=0; \
	$(TIMED) integration $(PY) -m pytest $(INTEGRATION) $(DURATIONS) $(PYTEST_ARGS) \
	  $(INTEGRATION_ARGS) || rc=1; \
	$(MAKE) --no-print-directory test-newer-unit NEWER="$(NEWER_IN_TEST)" || rc=1; \
	exit $$rc

# on each newer Python with a virtualenv (scripts/setup.sh) the unit tier, or the
# controller's integration tests; a Python this machine lacks is named and skipped
test-newer-unit: setup-python
	@$(call each_newer,unit,bash scripts/unprivileged.sh .venv-$$v/bin/python -m pytest \
	  -m "not integration" -n auto -p no:cacheprovider $(DURATIONS) $(PYTEST_ARGS))

test-newer-controller: setup
	@$(call each_newer,controller,.venv-$$v/bin/python -m pytest $(INTEGRATION) $(DURATIONS) \
	  $(CONTROLLER_TESTS) $(PYTEST_ARGS))

each_newer = rc=0; for v in $(NEWER); do \
	  if [ ! -x .venv-$$v/bin/python ]; then \
	    echo "[test] Python $$v: skipped (no interpreter here; scripts/setup.sh)"; continue; fi; \
	  $(TIMED) $(1)-$$v $(2) || rc=1; \
	done; exit $$rc

test-integration: setup
	$(PY) -m pytest $(INTEGRATION) $(PYTEST_ARGS)

test-e2e: setup
	@rc=0; \
	$(TIMED) unit-thorough env MALB_FUZZ=thorough $(PY) -m pytest -m "not integration" \
	  -n auto -p no:cacheprovider $(DURATIONS) $(PYTEST_ARGS) || rc=1; \
	$(TIMED) e2e $(PY) -m pytest -m e2e $(DURATIONS) $(PYTEST_ARGS) || rc=1; \
	$(TIMED) integration-ryu env MALB_FRAMEWORK=ryu $(PY) -m pytest $(INTEGRATION) \
	  $(DURATIONS) $(CONTROLLER_TESTS) $(PYTEST_ARGS) || rc=1; \
	$(MAKE) --no-print-directory test-newer-unit NEWER="$(filter-out $(NEWER_IN_TEST),$(NEWER))" \
	  || rc=1; \
	$(MAKE) --no-print-directory test-newer-controller || rc=1; \
	exit $$rc

test-ryu: setup
	MALB_FRAMEWORK=ryu $(PY) -m pytest $(INTEGRATION) $(CONTROLLER_TESTS) $(PYTEST_ARGS)

# the locks setup installs, from pyproject.toml; versions already locked stay where they can
locks: setup-python
	$(VENV)/bin/uv pip compile pyproject.toml --universal --python-version 3.11 \
	  --generate-hashes -o locks/runtime.txt
	$(VENV)/bin/uv pip compile pyproject.toml --extra plots --extra test --extra dev \
	  --universal --python-version 3.11 --generate-hashes -o locks/main.txt
	$(VENV)/bin/uv pip compile pyproject.toml --extra ryu --universal --python-version 3.11 \
	  --generate-hashes -o locks/ryu.txt

bench: setup
	$(PY) -m benchmarks

testbed: setup
	$(PY) -m topologies up --cli

check-testbed: setup
	$(PY) -m topologies check

clean-testbed:
	@if [ -x $(PY) ]; then $(PY) -m topologies clean; else echo "nothing set up yet"; fi

clean: clean-testbed
	rm -rf .pytest_cache .mypy_cache .ruff_cache
