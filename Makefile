# umstudy: the single entry point.
#   make run    set up, build src/, run the ReFrame suite on `local` (quick size), write the
#               provenance bundle (output/provenance/<run>/, one SHA-256) and the report
#   make test   set up, build, unit + integration tests, ReFrame CPU checks for real (locally and
#               through a single-host Slurm it starts), listings
#   make help   every target and variable
# Variables: SIZE=quick|paper  SYSTEM=local  PYTHON=<python with reframe>  JOBS=N
#            CHECKS=<regex of check names>  UMSTUDY_COMPONENTS="himeno;umbench" (a subset of src/)  RFMFLAGS=<more ReFrame options, e.g. -S UmbPatterns.trials=1>
#            REPEAT=N (make run: each case N times; a performance verdict needs >= 3)
#            UMSTUDY_ENVIRONS=all (every check under every programming environment; default one)
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
RFM := cd $(ROOT) && . reframe/env.sh && UMSTUDY_OUTPUT=$(OUTPUT) UMSTUDY_SIZE=$(SIZE) $(PYTHON) -c 'import sys; sys.argv[0] = "reframe"; from reframe.frontend.cli import main; main()' 
# umstudy's own modules (reframe/lib) through $(PYTHON); no `cd`, so it can end a pipe
UMSTUDY_PY = PYTHONPATH=$(ROOT)/reframe/lib $(PYTHON)
# `make run` shows one line per phase; the chatter of the set-up and the build goes to the
# run's build log, ReFrame's output to the run's ReFrame log (output/logs/).
RUN_NAME := $(SYSTEM)-$(SIZE)-$(shell date +%Y%m%dT%H%M%S)
run: STEP_LOG = $(OUTPUT)/logs/$(RUN_NAME)-build.log
# $(call step,NAME,COMMANDS): under `make run`, COMMANDS write to STEP_LOG and one line says
# how they went (with the log's last lines when they failed); elsewhere they print as usual.
step = $(if $(STEP_LOG),mkdir -p $(OUTPUT)/logs; t0=$$(date +%s); printf '%-12s' '$(1)'; \
  if ( $(2) ) >>$(STEP_LOG) 2>&1; then echo "ok ($$(( $$(date +%s) - t0 )) s)"; \
  else rc=$$?; echo "failed (exit $$rc); the end of $(STEP_LOG):"; tail -n 25 $(STEP_LOG) | sed 's/^/    /'; exit $$rc; fi,$(2))
STEP_QUIET = $(if $(STEP_LOG),@)

.PHONY: cluster-up cluster-down cluster-status
.PHONY: all help setup setup-system setup-python build jobs-arg test ctest pytest reframe-list reframe-cpu reframe-slurm reframe-cluster run run-args run-ready report spack-test system dist spack-pin spack-offline mirror mirror-bootstrap clean

all: build

help:
	@echo "make run       set up, build src/, run the ReFrame suite (quick size) on SYSTEM, write the report"
	@echo "make test      set up, build, unit + integration tests, CPU checks on this machine and through a local Slurm"
	@echo "make report    rebuild output/report/ from every run report in output/reports/"
	@echo "make system    write systems/NAME/system.yaml for your cluster (NAME=... SCHEDULER=slurm|pbs|nqsv ...;"
	@echo "               see README, 'Running on your cluster'; python3 -m umstudy.newsystem --help lists every answer)"
	@echo "make build | setup | ctest | pytest | reframe-list | reframe-cpu | reframe-slurm | reframe-cluster | spack-test | dist | spack-pin | spack-offline | mirror | clean"
	@echo "make cluster-up | cluster-down | cluster-status   a cluster in a box (root; NODES=4): eval \"\$$(make -s cluster-up)\", then --system cluster"
	@echo "variables:"
	@echo "  SIZE=quick|paper           quick (default): minutes on one node; paper: the papers' sizes"
	@echo "                             (the same for reframe: SIZE=paper reframe -c reframe/ ...; UMSTUDY_SIZE wins where set)"
	@echo "  SYSTEM=<name>              one of: $(SYSTEMS) (default local)"
	@echo "  CHECKS=<regex>             check names to run (make run), e.g. CHECKS='^Himeno'"
	@echo "  RFMFLAGS=<options>         more ReFrame options, e.g. RFMFLAGS='-S trials=1'"
	@echo "  REPEAT=N                   make run: each case N times (default 3; a performance verdict needs >= 3)"
	@echo "  UMSTUDY_COMPONENTS='a;b'   build a subset of src/ (himeno umbench xmp-coarray coarray-bench vcuda remd dlm)"
	@echo "  PYTHON=<python>            a Python with ReFrame (default: .venv, made by make setup)"
	@echo "  JOBS=N                     parallel build jobs (default: nproc)"
	@echo "  UMSTUDY_GROUP=<group>      your group/account on a site (Miyabi, Pegasus, Cygnus, TSUBAME4.0)"
	@echo "  UMSTUDY_ENVIRONS=all|a,b   every check under every programming environment (or those named);"
	@echo "                             default: one per check (the partition's first; OpenACC checks: its OpenACC one)"

setup: setup-system setup-python

# The cluster in a box (.ci/cluster.sh; root): NODES nodes as namespaces of this machine,
# Slurm and Grid Engine on them.  `eval "$(make -s cluster-up)"` sets the shell up for it
# (stdout carries only the exports); the link is measured with build/default's programs.
NODES ?= 4
cluster-up:
	@UMSTUDY_BUILD=$(BUILD) $(ROOT)/.ci/cluster.sh up $(NODES)

cluster-down:
	@$(ROOT)/.ci/cluster.sh down

cluster-status:
	@$(ROOT)/.ci/cluster.sh status

setup-system:
	@$(call step,system,$(ROOT)/.ci/setup-system.sh)

# A Python that already has ReFrame (a site module, PYTHON=...) is used as it is.
setup-python:
	@$(call step,python,$(SETUP_PYTHON))

SETUP_PYTHON = if $(PYTHON) -c 'import reframe, yaml' 2>/dev/null; then \
	  echo "setup: using $(PYTHON) ($$($(PYTHON) -c 'import reframe; print("reframe", reframe.VERSION)'))"; \
	else \
	  echo "setup: creating $(VENV) with reframe/requirements.txt"; \
	  UMSTUDY_NEED_VENV=1 $(ROOT)/.ci/setup-system.sh && \
	  python3 -m venv $(VENV) && $(VENV)/bin/pip install -q --upgrade pip && \
	  $(VENV)/bin/pip install -q -r $(ROOT)/reframe/requirements.txt; \
	fi

# `make run` on a fresh tree builds the programs only (its checks run no test program: a
# quarter less to compile) and leaves a configured tree as it is; `make test` and
# `make build` build the tests too.
BUILD_TESTING ?= ON
run: BUILD_TESTING = $(if $(wildcard $(BUILD)/CMakeCache.txt),,OFF)
# UMSTUDY_COMPONENTS is always passed: an empty list (all components) must replace a subset
# cached by an earlier call.
BUILD_CMD = cmake -S $(ROOT)/src -B $(BUILD) -DCMAKE_BUILD_TYPE=Release "-DUMSTUDY_COMPONENTS=$(UMSTUDY_COMPONENTS)" $(if $(BUILD_TESTING),-DBUILD_TESTING=$(BUILD_TESTING)) && \
	cmake --build $(BUILD) -j $(JOBS)
build: setup-system jobs-arg
	$(STEP_QUIET)$(call step,build,$(BUILD_CMD))

jobs-arg:
	@case "$(JOBS)" in ''|*[!0-9]*|0) echo "make: JOBS=$(JOBS) is not a positive number of parallel build jobs (e.g. JOBS=4)" >&2; exit 2;; esac

ctest: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

pytest: setup-python
	cd $(ROOT) && PYTHONPATH=$(ROOT)/reframe/lib $(PYTHON) -m pytest -q -rs reframe/tests analysis/tests \
	  --ignore=reframe/tests/test_slurm_local.py --ignore=reframe/tests/test_cluster_checks.py

# The CPU checks through a real Slurm started for the test (.ci/slurm-local.sh: munged,
# slurmctld and slurmd under a temporary directory, stopped afterwards): sbatch submits,
# srun launches, the results reach a run report.  Where Slurm cannot start (not root, no
# packages) the test skips and says why; with CI=true set it fails instead.
reframe-slurm: setup-python build
	cd $(ROOT) && PYTHONPATH=$(ROOT)/reframe/lib $(PYTHON) -m pytest -q -rs -s reframe/tests/test_slurm_local.py

# The multi-node checks through the cluster in a box (.ci/cluster.sh up 4, root; down
# afterwards, whatever happened): sbatch and qsub submit them, each rank's node is
# recorded, one rank per distinct node must hold, and a job packed onto one node must be
# a placement failure.  Skips with the reason where the cluster cannot start; with
# CI=true set it fails instead.
reframe-cluster: setup-python build
	cd $(ROOT) && UMSTUDY_BUILD=$(BUILD) PYTHONPATH=$(ROOT)/reframe/lib $(PYTHON) -m pytest -q -rs -s reframe/tests/test_cluster_checks.py

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

test: setup build ctest pytest reframe-list reframe-cpu reframe-slurm reframe-cluster spack-test
	@echo "make test: all passed"

# Bad input stops before anything is built or run, with the valid choices.
run-args: jobs-arg
	@echo "make run: $(SYSTEM), $(SIZE) size, each case $(REPEAT) time(s); logs: $(OUTPUT:$(ROOT)/%=%)/logs/$(RUN_NAME)-build.log (set-up, build), $(RUN_NAME).log (ReFrame)"
	@case "$(SIZE)" in quick|paper) ;; *) echo "make run: SIZE=$(SIZE) is not a size; choose SIZE=quick or SIZE=paper" >&2; exit 2;; esac
	@case "$(REPEAT)" in ''|*[!0-9]*|0) echo "make run: REPEAT=$(REPEAT) is not a positive number of repeats (a performance verdict needs >= 3)" >&2; exit 2;; esac
	@case " $(SYSTEMS) " in *" $(SYSTEM) "*) ;; *) echo "make run: SYSTEM=$(SYSTEM) is not a system; choose one of: $(SYSTEMS) (or add yours: make system)" >&2; exit 2;; esac

# Before anything is built: the system's batch system answers here (sinfo, qstat...), and
# CHECKS names at least one check (ReFrame's listing: seconds).
run-ready: setup-python
	@$(UMSTUDY_PY) -m umstudy.jobs scheduler $(SYSTEM) || exit 2
	@out=$$($(RFM_LIST) -n '$(CHECKS)' 2>&1); \
	n=$$(printf '%s\n' "$$out" | sed -n 's/^Found \([0-9]*\) check.*/\1/p'); \
	if [ -z "$$n" ]; then echo "make run: CHECKS='$(CHECKS)' cannot be used:" >&2; \
	  printf '%s\n' "$$out" | grep -iE 'error|invalid' | sed 's/^/  /' >&2; exit 2; fi; \
	if [ "$$n" = 0 ]; then echo "make run: CHECKS='$(CHECKS)' matches no check on $(SYSTEM); the checks are:" >&2; \
	  ($(RFM_LIST) 2>/dev/null | sed -n 's/^- \([A-Za-z0-9_]*\).*/  \1/p' | sort -u) >&2; exit 2; fi; \
	printf '%-12s%s\n' checks "$$n match CHECKS='$(CHECKS)' on $(SYSTEM)"
RFM_LIST = export UMSTUDY_RUN_LOG=/dev/null; $(RFM) -c reframe/ --system $(SYSTEM) -l --nocolor

# One ReFrame log per run (output/logs/<report name>.log; output/reframe.log points to the
# latest); on the terminal one line per phase, a count of the cases while they run, and
# the verdicts at the end.  A missed performance reference is a measurement, which the
# report judges: only other failures (a build, a crash, a wrong result) make run fail.
# Ctrl-C stops ReFrame and exits 130: the interrupted run's report is set aside
# (.interrupted), so the report and later runs see only complete runs.
run: run-args setup run-ready build
	@mkdir -p $(OUTPUT)/reports $(OUTPUT)/logs
	@name=$(RUN_NAME); rf=$(OUTPUT)/reports/$$name.json; log=$(OUTPUT)/logs/$$name.log; \
	rc=0; interrupted=0; trap 'interrupted=1' INT TERM; \
	ln -sfn logs/$$name.log $(OUTPUT)/reframe.log; t0=$$(date +%s); \
	( export UMSTUDY_RUN_LOG=$$log; $(RFM) -c reframe/ --system $(SYSTEM) -r -n '$(CHECKS)' --repeat $(REPEAT) --nocolor $(RFMFLAGS) --report-file=$$rf ) 2>&1 \
	  | $(UMSTUDY_PY) -m umstudy.runview progress run; rc=$${PIPESTATUS[0]}; \
	if [ $$interrupted = 1 ] || [ $$rc -ge 128 ]; then \
	  [ ! -f $$rf ] || mv $$rf $$rf.interrupted; echo; \
	  echo "make run: interrupted; earlier reports are untouched (ReFrame's log: $$log)" >&2; exit 130; fi; \
	if [ ! -f $$rf ]; then echo "ReFrame stopped (exit $$rc) before writing a run report; see $$log" >&2; exit $$rc; fi; \
	$(UMSTUDY_PY) -m umstudy.runview summary $$rf $$(( $$(date +%s) - t0 )); \
	if [ $$rc -ne 0 ]; then why=$$(cd $(ROOT) && PYTHONPATH=$(ROOT)/reframe/lib $(PYTHON) analysis/report.py --failures-are-verdicts $$rf 2>&1) \
	  && rc=0 || printf '%s\n' "$$why" >&2; fi; \
	printf '%-12s%s\n' 'run report' "$${rf#$(ROOT)/}"; printf '%-12s' provenance; \
	if $(PYTHON) $(ROOT)/analysis/provenance.py --report $$rf --system $(SYSTEM) --python $(PYTHON) >/dev/null 2>>$(STEP_LOG); \
	  then echo "ok ($$(sed -n 's/^provenance: \([^ ]*\) sha256 .*/\1/p' $(STEP_LOG) | tail -n 1 | sed 's|^$(ROOT)/||'))"; \
	  else echo "failed; see $(STEP_LOG)"; rc=1; fi; \
	printf '%-12s' report; \
	if $(REPORT) >/dev/null 2>>$(STEP_LOG); then echo "$(OUTPUT:$(ROOT)/%=%)/report/report.html"; \
	  $(UMSTUDY_PY) -m umstudy.runview verdicts $(OUTPUT)/report/verdicts.json; else echo "failed; see $(STEP_LOG)"; rc=1; fi; \
	[ $$rc -eq 0 ] || echo "make run: failures (exit $$rc); ReFrame's log: $$log" >&2; exit $$rc

# (Called by run as a command, not through $(MAKE): `make -n run` must not run anything.)
REPORT = cd $(ROOT) && PYTHONPATH=$(ROOT)/reframe/lib $(PYTHON) analysis/report.py \
	  --out $(OUTPUT)/report $$(ls -tr $(OUTPUT)/reports/*.json)
report: setup-python
	$(REPORT)

# Your own cluster in one command (README, "Running on your cluster"): run it on a compute
# node; NAME and SCHEDULER are needed, the rest is optional (newsystem --help lists all).
#   make system NAME=mycluster SCHEDULER=slurm QUEUE=gpu GPUS=4 MODULES='cuda/12.6 openmpi' \
#        ACCOUNT='--account=${UMSTUDY_GROUP}'
#   make system NAME=mycluster SCHEDULER=ge GE_NODES='-l node_f={nodes}' ACCOUNT='-g ${UMSTUDY_GROUP}'
# ACCOUNT is passed as written (`$(value ...)`: make does not expand ${UMSTUDY_GROUP}), so the
# profile names the group when a job is made, from UMSTUDY_GROUP.
system: setup-python
	@[ -n "$(NAME)" ] && [ -n "$(SCHEDULER)" ] || { echo "make system: give NAME=<name> and SCHEDULER=slurm|pbs|nqsv|ge (optional: QUEUE= PAPER_QUEUE= GPUS= MODULES= ACCOUNT= GE_NODES= SYSTEMFLAGS=)" >&2; exit 2; }
	cd $(ROOT) && PYTHONPATH=$(ROOT)/reframe/lib $(PYTHON) -m umstudy.newsystem --name '$(NAME)' --scheduler '$(SCHEDULER)' \
	  $(if $(QUEUE),--queue '$(QUEUE)') $(if $(PAPER_QUEUE),--paper-queue '$(PAPER_QUEUE)') \
	  $(if $(GPUS),--gpus-per-node '$(GPUS)') $(if $(MODULES),--modules '$(MODULES)') \
	  $(if $(value ACCOUNT),'--account-option=$(value ACCOUNT)') \
	  $(if $(value GE_NODES),'--ge-nodes-option=$(value GE_NODES)') $(SYSTEMFLAGS)

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
