# The two commands for a fresh machine: `make run` and `make test` (both set up what is missing).
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
PYTEST_ARGS ?=
# the controller's integration tests, run a second time with the controller under os-ken
# (ryu_apps/osken_manager.py in .venv-osken; docs/setup.md, "Frameworks")
OSKEN_TESTS := tests/integration/test_controller.py tests/integration/test_controller_process.py \
               tests/integration/test_controller_multiswitch.py tests/integration/test_own_network.py

.PHONY: help setup run test test-unit test-integration test-osken bench testbed check-testbed \
        clean-testbed clean

help:
	@echo "make run             set up what is missing, then compare srr, ln, malb-paper and malb (one run each, about 9 min)"
	@echo "make test            set up what is missing, then run every test (unit + integration)"
	@echo "make setup           install packages, start OVS and Docker, virtualenv, images (idempotent)"
	@echo "make test-unit       fast tests of the pure cores only (no root needed after setup)"
	@echo "make test-integration  tests with real OVS, Docker, Mininet and ryu-manager"
	@echo "make test-osken      the controller's integration tests with the controller under os-ken"
	@echo "make bench           benchmarks (figures go to results/ and docs)"
	@echo "make testbed         bring the paper testbed up with the Mininet CLI"
	@echo "make check-testbed   bring the paper testbed up, check connectivity, tear it down"
	@echo "make clean-testbed   remove leftovers: containers labelled malb, our bridges, namespaces"

setup:
	@bash scripts/setup.sh

run: setup
	$(PY) -m experiments.lb_comparison

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)
	MALB_FRAMEWORK=os-ken $(PY) -m pytest -m integration $(OSKEN_TESTS) $(PYTEST_ARGS)

test-unit:
	$(PY) -m pytest -m "not integration" $(PYTEST_ARGS)

test-integration: setup
	$(PY) -m pytest -m integration $(PYTEST_ARGS)

test-osken: setup
	MALB_FRAMEWORK=os-ken $(PY) -m pytest -m integration $(OSKEN_TESTS) $(PYTEST_ARGS)

bench: setup
	$(PY) -m benchmarks

testbed: setup
	$(PY) -m topologies up --cli

check-testbed: setup
	$(PY) -m topologies check

clean-testbed:
	@if [ -x $(PY) ]; then $(PY) -m topologies clean; else echo "nothing set up yet"; fi

clean: clean-testbed
	rm -rf .pytest_cache
