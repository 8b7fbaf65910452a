# umstudy: the single entry point.
#   make run    set up, build src/, run the ReFrame suite on `local` (quick size), write the
#               provenance bundle (output/provenance/<run>/, one SHA-256) and the report
#   make test   set up, build, unit + integration tests, ReFrame CPU checks for real, listings
# Variables: SIZE=quick|paper  SYSTEM=local  PYTHON=<python with reframe>  JOBS=N
#            CHECKS=<regex of check names>  UMSTUDY_COMPONENTS="himeno;umbench" (a subset of src/)  RFMFLAGS=<more ReFrame options, e.g. -S UmbPatterns.trials=1>
#            REPEAT=N (make run: each case N times; a performance verdict needs >= 3)
SHELL := /bin/bash
ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
VENV := $(ROOT)/.venv
PYTHON ?= $(VENV)/bin/python
BUILD := $(ROOT)/build/default
SIZE ?= quick
SYSTEM ?= local
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
OUTPUT := $(ROOT)/output
RFMFLAGS ?=
REPEAT ?= 3
CHECKS ?= .
SYSTEMS := $(notdir $(patsubst %/system.yaml,%,$(wildcard $(ROOT)/systems/*/system.yaml)))
# ReFrame through $(PYTHON), wherever its `reframe` script was installed.
RFM := cd $(ROOT) && . reframe/env.sh && UMSTUDY_SIZE=$(SIZE) $(PYTHON) -c 'import sys; sys.argv[0] = "reframe"; from reframe.frontend.cli import main; main()' 

.PHONY: all setup setup-system setup-python build test ctest pytest reframe-list reframe-cpu run report spack-test mirror mirror-bootstrap mirror-sources clean

all: build

setup: setup-system setup-python

setup-system:
	@$(ROOT)/.ci/setup-system.sh

# A Python that already has ReFrame (a site module, PYTHON=...) is used as it is.
setup-python:
	@if $(PYTHON) -c 'import reframe, yaml' 2>/dev/null; then \
	  echo "setup: using $(PYTHON) ($$($(PYTHON) -c 'import reframe; print("reframe", reframe.VERSION)'))"; \
	else \
	  echo "setup: creating $(VENV) with reframe/requirements.txt"; \
	  UMSTUDY_NEED_VENV=1 $(ROOT)/.ci/setup-system.sh && \
	  python3 -m venv $(VENV) && $(VENV)/bin/pip install -q --upgrade pip && \
	  $(VENV)/bin/pip install -q -r $(ROOT)/reframe/requirements.txt; \
	fi

build: setup-system
	# always passed: an empty list (all components) must replace a subset cached by an earlier call
	cmake -S $(ROOT)/src -B $(BUILD) -DCMAKE_BUILD_TYPE=Release "-DUMSTUDY_COMPONENTS=$(UMSTUDY_COMPONENTS)"
	cmake --build $(BUILD) -j $(JOBS)

ctest: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

pytest: setup-python
	cd $(ROOT) && PYTHONPATH=$(ROOT)/reframe/lib $(PYTHON) -m pytest -q -rs reframe/tests analysis/tests

# Every check must list on every system profile, and dry-run there.
reframe-list: setup-python
	@mkdir -p $(OUTPUT); for s in $(SYSTEMS); do \
	  echo "== $$s"; \
	  ($(RFM) -c reframe/ --system $$s -l) | grep -E '^- |^Found' || exit 1; \
	  ($(RFM) -c reframe/ --system $$s --dry-run --report-file=$(OUTPUT)/dry-run-$$s.json) > $(OUTPUT)/dry-run-$$s.log 2>&1 || { cat $(OUTPUT)/dry-run-$$s.log; exit 1; }; \
	done

# The CPU checks for real on this machine (GPU checks skip with their reason here).
# Their performance references are not judged: a 2-core CI box oversubscribed by MPI
# ranks says nothing about them (make run judges them, and the report).
reframe-cpu: setup-python build
	$(RFM) -c reframe/ --system local -r --skip-performance-check --report-file=$(OUTPUT)/test-report.json

spack-test: setup-python
	cd $(ROOT) && PYTHONPATH=$(ROOT)/reframe/lib $(PYTHON) -m pytest -q -rs spack-repo/tests containers/tests

test: setup build ctest pytest reframe-list reframe-cpu spack-test
	@echo "make test: all passed"

run: setup build
	mkdir -p $(OUTPUT)/reports
	@rf=$(OUTPUT)/reports/$(SYSTEM)-$(SIZE)-$$(date +%Y%m%dT%H%M%S).json; rc=0; \
	$(RFM) -c reframe/ --system $(SYSTEM) -r -n '$(CHECKS)' --repeat $(REPEAT) $(RFMFLAGS) --report-file=$$rf || rc=$$?; \
	if [ $$rc -ne 0 ] && [ -f $$rf ] && (cd $(ROOT) && PYTHONPATH=$(ROOT)/reframe/lib $(PYTHON) analysis/report.py --failures-are-verdicts $$rf); then rc=0; fi; \
	[ ! -f $$rf ] || $(PYTHON) $(ROOT)/analysis/provenance.py --report $$rf --system $(SYSTEM) --python $(PYTHON) >/dev/null || rc=1; \
	$(MAKE) --no-print-directory report || rc=1; \
	echo "report: $(OUTPUT)/report/report.html"; exit $$rc

report: setup-python
	cd $(ROOT) && PYTHONPATH=$(ROOT)/reframe/lib $(PYTHON) analysis/report.py \
	  --out $(OUTPUT)/report $$(ls -tr $(OUTPUT)/reports/*.json)

# Air-gapped sites (ARTIFACT.md, "Offline"): on a machine WITH network, after
# `. spack/share/spack/setup-env.sh`, this fills MIRROR with Spack's bootstrap (clingo,
# gnupg...) and the sources of everything systems/$(SYSTEM)/spack.yaml builds (from its
# spack.lock when there is one: concretise on the site, copy the lock here).  The
# artifact's own components come from this checkout, so they are left out.
MIRROR ?= $(OUTPUT)/mirror
SPACK ?= spack
mirror: mirror-bootstrap mirror-sources
	@echo "mirror: $(MIRROR); on the site: see ARTIFACT.md, D.4"
mirror-bootstrap:
	@command -v $(SPACK) >/dev/null || { echo "mirror: no $(SPACK) on PATH (source Spack's setup-env.sh)"; exit 2; }
	$(SPACK) bootstrap mirror --binary-packages $(MIRROR)/bootstrap
mirror-sources:
	@command -v $(SPACK) >/dev/null || { echo "mirror: no $(SPACK) on PATH (source Spack's setup-env.sh)"; exit 2; }
	[ -f $(ROOT)/systems/$(SYSTEM)/spack.lock ] || $(SPACK) -e $(ROOT)/systems/$(SYSTEM) concretize
	$(SPACK) -e $(ROOT)/systems/$(SYSTEM) mirror create -d $(MIRROR)/source --all --skip-unstable-versions \
	  --exclude-specs "$$(cd $(ROOT) && PYTHONPATH=reframe/lib $(PYTHON) -c 'from umstudy import spackenv; print(" ".join(spackenv.components() + [spackenv.BUNDLE]))')"

clean:
	rm -rf $(ROOT)/build $(OUTPUT)
