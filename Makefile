# The two commands for a fresh machine: `make run` and `make test` (both set up what is missing).
# The test tiers (docs/tests.md): `make check` (lint, types, unit tests; no root, a few
# minutes), `make test` (check, then the integration tier against the real components),
# `make test-e2e` (every policy end to end, the full fault suite, the soak, the scenarios).
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
PYTEST_ARGS ?=
# each tier's wall time is printed when it ends, and kept in $(MALB_TIMES) when that is set
TIMED := bash scripts/timed.sh
DURATIONS := --durations=25
# The controller's own integration modules run under os-ken in `make test` and under Ryu in
# `make test-e2e`; every other module runs the controller under Ryu (docs/setup.md,
# "Frameworks"), so both frameworks are exercised by every `make test`.
CONTROLLER_TESTS := tests/integration/test_controller.py \
                    tests/integration/test_controller_process.py \
                    tests/integration/test_controller_multiswitch.py \
                    tests/integration/test_own_network.py
INTEGRATION := -m "integration and not e2e"

.PHONY: help setup setup-python run check lint types test-unit test test-integration \
        test-e2e test-osken bench testbed check-testbed clean-testbed clean

help:
	@echo "make run             set up what is missing, then compare srr, ln, malb-paper and malb (one run each, about 9 min)"
	@echo "make test            make check, then the integration tier: real OVS, Docker, Mininet, ryu-manager and os-ken, HAProxy, nginx, Prometheus, Chromium (about 15 min)"
	@echo "make check           lint (ruff), types (mypy) and the unit tier in parallel, without root (about 3 min)"
	@echo "make test-e2e        every policy end to end, the full fault suite, the soak, the scenarios, thorough fuzzing (about 30 min)"
	@echo "make setup           install packages, start OVS and Docker, virtualenvs, images (idempotent)"
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

# both parts of the integration tier run, whichever fails
test: check setup
	@rc=0; \
	$(TIMED) integration-os-ken env MALB_FRAMEWORK=os-ken $(PY) -m pytest $(INTEGRATION) \
	  $(DURATIONS) $(CONTROLLER_TESTS) $(PYTEST_ARGS) || rc=1; \
	$(TIMED) integration $(PY) -m pytest $(INTEGRATION) $(DURATIONS) \
	  $(addprefix --ignore=,$(CONTROLLER_TESTS)) $(PYTEST_ARGS) || rc=1; \
	exit $$rc

test-integration: setup
	$(PY) -m pytest $(INTEGRATION) $(PYTEST_ARGS)

test-e2e: setup
	@rc=0; \
	$(TIMED) unit-thorough env MALB_FUZZ=thorough $(PY) -m pytest -m "not integration" \
	  -n auto -p no:cacheprovider $(DURATIONS) $(PYTEST_ARGS) || rc=1; \
	$(TIMED) e2e $(PY) -m pytest -m e2e $(DURATIONS) $(PYTEST_ARGS) || rc=1; \
	$(TIMED) integration-ryu env MALB_FRAMEWORK=ryu $(PY) -m pytest $(INTEGRATION) \
	  $(DURATIONS) $(CONTROLLER_TESTS) $(PYTEST_ARGS) || rc=1; \
	exit $$rc

test-osken: setup
	MALB_FRAMEWORK=os-ken $(PY) -m pytest $(INTEGRATION) $(CONTROLLER_TESTS) $(PYTEST_ARGS)

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
