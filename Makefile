# umstudy: the single entry point.
#   make run    set up, build src/, run the ReFrame suite on `local` (quick size), write the
#               provenance bundle (output/provenance/<run>/, one SHA-256) and the report
#   make test   set up, build, unit + integration tests, ReFrame CPU checks for real, listings
# Variables: SIZE=quick|paper  SYSTEM=local  PYTHON=<python with reframe>  JOBS=N
#            CHECKS=<regex of check names>  UMSTUDY_COMPONENTS="himeno;umbench" (a subset of src/)  RFMFLAGS=<more ReFrame options, e.g. -S UmbPatterns.trials=1>
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
CHECKS ?= .
SYSTEMS := $(notdir $(patsubst %/system.yaml,%,$(wildcard $(ROOT)/systems/*/system.yaml)))
# ReFrame through $(PYTHON), wherever its `reframe` script was installed.
RFM := cd $(ROOT) && . reframe/env.sh && UMSTUDY_SIZE=$(SIZE) $(PYTHON) -c 'import sys; sys.argv[0] = "reframe"; from reframe.frontend.cli import main; main()' 

.PHONY: all setup setup-system setup-python build test ctest pytest reframe-list reframe-cpu run report spack-test dist spack-pin spack-offline mirror mirror-bootstrap clean

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
	$(RFM) -c reframe/ --system $(SYSTEM) -r -n '$(CHECKS)' $(RFMFLAGS) --report-file=$$rf || rc=$$?; \
	if [ $$rc -ne 0 ] && [ -f $$rf ] && (cd $(ROOT) && PYTHONPATH=$(ROOT)/reframe/lib $(PYTHON) analysis/report.py --failures-are-verdicts $$rf); then rc=0; fi; \
	[ ! -f $$rf ] || $(PYTHON) $(ROOT)/analysis/provenance.py --report $$rf --system $(SYSTEM) --python $(PYTHON) >/dev/null || rc=1; \
	$(MAKE) --no-print-directory report || rc=1; \
	echo "report: $(OUTPUT)/report/report.html"; exit $$rc

report: setup-python
	cd $(ROOT) && PYTHONPATH=$(ROOT)/reframe/lib $(PYTHON) analysis/report.py \
	  --out $(OUTPUT)/report $$(ls -tr $(OUTPUT)/reports/*.json)

# ---- Spack: the release tarball and the offline mirror (README "Spack", ARTIFACT.md D.4) ----
# Stdlib Python only (python3 on PATH), so a fresh clone needs no venv for these.
DIST_PYTHON ?= python3
MIRROR ?= $(OUTPUT)/mirror
SPACK ?= spack
# The release tarball the recipes pin (reproducible: same checkout, same sha256).
dist:
	$(DIST_PYTHON) $(ROOT)/spack-repo/dist.py --out $(OUTPUT)/dist
# After a change to src/ or LICENSE: pin the new tarball's sha256 in the recipes.
spack-pin:
	$(DIST_PYTHON) $(ROOT)/spack-repo/dist.py --pin --out $(OUTPUT)/dist
# What `spack install umstudy` needs offline, as a Spack 1.x source mirror in
# MIRROR/source: the release tarball (_source-cache/archive/, by its sha256) and the sources
# of every non-external dependency of systems/$(SYSTEM)'s environment (compiler-wrapper...),
# taken from the network or from the mirrors Spack already has.
spack-offline:
	@command -v $(SPACK) >/dev/null || { echo "spack-offline: no $(SPACK) on PATH (source Spack's setup-env.sh)"; exit 2; }
	$(DIST_PYTHON) $(ROOT)/spack-repo/dist.py --out $(OUTPUT)/dist --mirror $(MIRROR)/source
	[ -f $(ROOT)/systems/$(SYSTEM)/spack.lock ] || $(SPACK) -e $(ROOT)/systems/$(SYSTEM) concretize
	$(SPACK) -e $(ROOT)/systems/$(SYSTEM) mirror create -d $(MIRROR)/source --all --skip-unstable-versions
# Air-gapped sites (ARTIFACT.md D.4), on a machine with network: the above plus Spack's
# bootstrap (clingo, gnupg...).  Concretise on the site first and copy its
# systems/<name>/spack.lock here: the mirror then holds exactly what the site builds.
mirror: spack-offline mirror-bootstrap
	@echo "mirror: $(MIRROR); on the site: see ARTIFACT.md, D.4"
mirror-bootstrap:
	@command -v $(SPACK) >/dev/null || { echo "mirror: no $(SPACK) on PATH (source Spack's setup-env.sh)"; exit 2; }
	$(SPACK) bootstrap mirror --binary-packages $(MIRROR)/bootstrap

clean:
	rm -rf $(ROOT)/build $(OUTPUT)
